import pLimit, { type LimitFunction } from 'p-limit';
import { holdsOrder, OrderingChains } from './ordering.js';
import type { Delivery, DeliveryOutcome } from './types.js';

/**
 * Bounds concurrency (p-limit) and serialises deliveries that share an ordering key
 * (FIFO message group, Kafka record key). A delivery waiting for its predecessor does
 * not hold a concurrency slot, so one hot group cannot starve the others. When a
 * predecessor went back to the broker (retry), the follower is skipped (released) so
 * it cannot overtake it.
 */
export class Dispatcher<T> {
  private readonly limit: LimitFunction;
  private readonly chains = new OrderingChains();
  private readonly capacityWaiters: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];
  private pendingCount = 0;

  /**
   * `concurrency` bounds the database work; up to `capacity` deliveries may be pending
   * in all (running, waiting for their key, or being acked).
   */
  constructor(
    concurrency: number,
    private readonly capacity: number,
    /** Runs under the concurrency limit; the function it returns (the broker part) runs outside it. */
    private readonly work: (delivery: Delivery<T>) => Promise<() => Promise<DeliveryOutcome>>,
    private readonly skip: (delivery: Delivery<T>) => Promise<DeliveryOutcome>,
  ) {
    this.limit = pLimit(concurrency);
  }

  /** Deliveries accepted and not yet settled. */
  get pending(): number {
    return this.pendingCount;
  }

  dispatch(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    this.pendingCount++;
    const run = () =>
      this.limit(() => this.work(delivery))
        .then((settle) => settle())
        .catch((): DeliveryOutcome => 'unsettled');
    const key = delivery.orderingKey;
    let promise: Promise<DeliveryOutcome>;
    if (key === undefined) {
      promise = run();
    } else {
      const seq = this.chains.next();
      promise = this.chains.tail(key).then(async () => {
        if (this.chains.isHeld(key, seq))
          return this.skip(delivery).catch((): DeliveryOutcome => 'unsettled');
        const outcome = await run();
        if (holdsOrder(outcome)) this.chains.hold(key);
        return outcome;
      });
      this.chains.extend(key, promise);
    }
    return promise.then((outcome) => {
      this.pendingCount--;
      this.wake();
      return outcome;
    });
  }

  freeCapacity(): number {
    return Math.max(0, this.capacity - this.pendingCount);
  }

  /** Resolves when a slot is free or `signal` aborts. */
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

  /** Resolves when nothing is pending. */
  async idle(): Promise<void> {
    if (this.pendingCount === 0) return;
    await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  private wake(): void {
    if (this.freeCapacity() > 0) for (const w of this.capacityWaiters.splice(0)) w();
    if (this.pendingCount === 0) for (const w of this.idleWaiters.splice(0)) w();
  }
}
