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
  /** Per key in the buffer: the work of that key it must wait for (the tail when the key came in). */
  private bufferBefore = new Map<string, Promise<unknown> | undefined>();
  /** Settles when the buffer's batch did: each key's tail from the moment it enters the buffer. */
  private bufferSettled: Deferred | undefined;
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
    const key = delivery.orderingKey;
    // The key's tail moves to this buffer now, not at flush: a delivery waiting here must
    // keep its key (and a hold on it) alive, else a batch settling meanwhile forgets the hold.
    if (key !== undefined && !this.bufferBefore.has(key)) {
      this.bufferBefore.set(key, this.chains.tail(key));
      this.chains.extend(key, (this.bufferSettled ??= deferred()).promise);
    }
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
   * keys, and is the tail of each of its keys from the moment the key entered the buffer
   * (a batch settles all its deliveries at once, so a tail per delivery would only cost
   * a promise and a closure each).
   */
  private flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length === 0) return;
    const before = new Set<Promise<unknown>>();
    for (const tail of this.bufferBefore.values()) if (tail !== undefined) before.add(tail);
    const done = this.bufferSettled;
    this.bufferBefore = new Map();
    this.bufferSettled = undefined;
    const run = (): Promise<DeliveryOutcome[]> =>
      this.limit(() => this.runBatch(batch)).catch(() =>
        batch.map((): DeliveryOutcome => 'unsettled'),
      );
    const outcomes = before.size === 0 ? run() : Promise.all(before).then(run);
    const settled = outcomes.then((o) => {
      for (let i = 0; i < batch.length; i++) batch[i]!.resolve(o[i] ?? 'unsettled');
      this.leave(batch.length);
    });
    if (done !== undefined) void settled.then(done.resolve);
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

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}
