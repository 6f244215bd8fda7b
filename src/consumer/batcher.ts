import pLimit, { type LimitFunction } from 'p-limit';
import { OrderingChains } from './ordering.js';
import { PendingGate } from './pending-gate.js';
import type { Delivery, DeliveryOutcome } from '../types.js';

/**
 * Processes one batch. `held[i]`: delivery i must be released (an earlier delivery of
 * its key went back to the broker); `hold(key)` reports such a return during the batch.
 */
export type BatchWork<T> = (
  deliveries: ReadonlyArray<Delivery<T>>,
  held: readonly boolean[],
  hold: (key: string) => void,
) => Promise<DeliveryOutcome[]>;

interface Pending<T> {
  delivery: Delivery<T>;
  resolve: (outcome: DeliveryOutcome) => void;
  /** Settles after the work of the same ordering key dispatched just before this one. */
  before: Promise<unknown> | undefined;
  seq: number;
}

/**
 * Batch mode's dispatcher: gathers deliveries for up to `maxWaitMs` or `maxSize`,
 * runs at most `concurrency` batches at once, and never lets two batches touching the
 * same ordering key overlap.
 */
export class Batcher<T> extends PendingGate {
  private readonly limit: LimitFunction;
  private readonly chains = new OrderingChains();
  private buffer: Array<Pending<T>> = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    concurrency: number,
    private readonly maxSize: number,
    private readonly maxWaitMs: number,
    private readonly work: BatchWork<T>,
  ) {
    // Room for every running batch to be full, plus one batch being gathered.
    super((concurrency + 1) * maxSize);
    this.limit = pLimit(concurrency);
  }

  dispatch(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    const key = delivery.orderingKey;
    const before = key === undefined ? undefined : this.chains.tail(key);
    const seq = this.chains.next();
    const promise = new Promise<DeliveryOutcome>((resolve) =>
      this.buffer.push({ delivery, resolve, before, seq }),
    );
    if (key !== undefined) this.chains.extend(key, promise);
    if (this.buffer.length >= this.maxSize) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.maxWaitMs);
    return this.track(promise);
  }

  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length === 0) return;
    // Only the first delivery of a key in this batch waits outside it; later ones of the
    // same key follow it inside the batch.
    const firstOfKey = new Map<string, Promise<unknown>>();
    for (const p of batch) {
      const k = p.delivery.orderingKey;
      if (k !== undefined && !firstOfKey.has(k)) firstOfKey.set(k, p.before ?? Promise.resolve());
    }
    const outcomes = Promise.all(firstOfKey.values()).then(() =>
      this.limit(() => {
        const held = batch.map(
          (p) =>
            p.delivery.orderingKey !== undefined &&
            this.chains.isHeld(p.delivery.orderingKey, p.seq),
        );
        return this.work(
          batch.map((p) => p.delivery),
          held,
          (key) => this.chains.hold(key),
        );
      }).catch(() => batch.map((): DeliveryOutcome => 'unsettled')),
    );
    void outcomes.then((o) => batch.forEach((p, i) => p.resolve(o[i] ?? 'unsettled')));
  }
}
