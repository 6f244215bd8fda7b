import pLimit, { type LimitFunction } from 'p-limit';
import { holdsOrder, OrderingChains } from './ordering.js';
import type { Delivery, DeliveryOutcome } from './types.js';

/** Processes one batch; `held` are ordering keys whose predecessor went back to the broker. */
export type BatchWork<T> = (deliveries: ReadonlyArray<Delivery<T>>, held: ReadonlySet<string>) => Promise<DeliveryOutcome[]>;

interface Pending<T> {
  delivery: Delivery<T>;
  resolve: (outcome: DeliveryOutcome) => void;
}

/**
 * Batch mode's dispatcher: gathers deliveries for up to `maxWaitMs` or `maxSize`,
 * runs at most `concurrency` batches at once, and never lets two batches touching the
 * same ordering key overlap.
 */
export class Batcher<T> {
  private readonly limit: LimitFunction;
  private readonly chains = new OrderingChains();
  private buffer: Array<Pending<T>> = [];
  private timer: NodeJS.Timeout | undefined;
  private pendingCount = 0;
  private readonly capacityWaiters: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];

  constructor(
    private readonly concurrency: number,
    private readonly maxSize: number,
    private readonly maxWaitMs: number,
    private readonly work: BatchWork<T>,
  ) {
    this.limit = pLimit(concurrency);
  }

  get pending(): number {
    return this.pendingCount;
  }

  dispatch(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    this.pendingCount++;
    const promise = new Promise<DeliveryOutcome>((resolve) => this.buffer.push({ delivery, resolve }));
    if (this.buffer.length >= this.maxSize) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.maxWaitMs);
    return promise.then((outcome) => {
      this.pendingCount--;
      this.wake();
      return outcome;
    });
  }

  /** Room for every running batch to be full, plus one batch being gathered. */
  freeCapacity(): number {
    return Math.max(0, (this.concurrency + 1) * this.maxSize - this.pendingCount);
  }

  async waitForCapacity(signal: AbortSignal): Promise<void> {
    if (this.freeCapacity() > 0 || signal.aborted) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        resolve();
      };
      signal.addEventListener('abort', done, { once: true });
      this.capacityWaiters.push(done);
    });
  }

  async idle(): Promise<void> {
    if (this.pendingCount === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length === 0) return;
    const keys = batch.map((p) => p.delivery.orderingKey).filter((k): k is string => k !== undefined);
    const outcomes = this.chains.previous(keys).then(async (before) => {
      const held = new Set([...before].filter(([, o]) => holdsOrder(o)).map(([k]) => k));
      return this.limit(() => this.work(batch.map((p) => p.delivery), held)).catch(() => batch.map((): DeliveryOutcome => 'unsettled'));
    });
    for (const key of new Set(keys)) {
      const last = batch.map((p) => p.delivery.orderingKey).lastIndexOf(key);
      this.chains.extend(key, outcomes.then((o) => o[last] ?? 'unsettled'));
    }
    void outcomes.then((o) => batch.forEach((p, i) => p.resolve(o[i] ?? 'unsettled')));
  }

  private wake(): void {
    if (this.freeCapacity() > 0) for (const w of this.capacityWaiters.splice(0)) w();
    if (this.pendingCount === 0) for (const w of this.idleWaiters.splice(0)) w();
  }
}
