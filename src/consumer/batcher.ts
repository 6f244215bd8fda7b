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
    const seq = this.chains.next();
    this.enter();
    const promise = new Promise<DeliveryOutcome>((resolve) =>
      this.buffer.push({ delivery, resolve, seq }),
    );
    if (this.buffer.length >= this.maxSize) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.maxWaitMs);
    return promise;
  }

  /**
   * Hands the gathered deliveries over as one batch. Ordering is kept per key and per
   * batch, not per delivery: the batch waits for the previous batches holding any of its
   * keys, and becomes the tail of each of its keys (a batch settles all its deliveries
   * at once, so a tail per delivery would only cost a promise and a closure each).
   */
  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length === 0) return;
    const keys = new Set<string>();
    const before = new Set<Promise<unknown>>();
    for (const p of batch) {
      const k = p.delivery.orderingKey;
      if (k === undefined || keys.has(k)) continue;
      keys.add(k);
      const tail = this.chains.tail(k);
      if (tail !== undefined) before.add(tail);
    }
    const run = (): Promise<DeliveryOutcome[]> =>
      this.limit(() => this.runBatch(batch)).catch(() =>
        batch.map((): DeliveryOutcome => 'unsettled'),
      );
    const outcomes = before.size === 0 ? run() : Promise.all(before).then(run);
    const settled = outcomes.then((o) => {
      for (let i = 0; i < batch.length; i++) batch[i]!.resolve(o[i] ?? 'unsettled');
      this.leave(batch.length);
    });
    for (const k of keys) this.chains.extend(k, settled);
  }

  private runBatch(batch: ReadonlyArray<Pending<T>>): Promise<DeliveryOutcome[]> {
    const held = batch.map(
      (p) =>
        p.delivery.orderingKey !== undefined && this.chains.isHeld(p.delivery.orderingKey, p.seq),
    );
    return this.work(
      batch.map((p) => p.delivery),
      held,
      (key) => this.chains.hold(key),
    );
  }
}
