import pLimit, { type LimitFunction } from 'p-limit';
import { holdsOrder, OrderingChains } from './ordering.js';
import { PendingGate } from './pending-gate.js';
import type { Delivery, DeliveryOutcome } from '../types.js';

/**
 * Bounds concurrency (p-limit) and serialises deliveries that share an ordering key
 * (FIFO message group, Kafka record key). A delivery waiting for its predecessor does
 * not hold a concurrency slot, so one hot group cannot starve the others. When a
 * predecessor went back to the broker (retry), the follower is skipped (released) so
 * it cannot overtake it.
 */
export class Dispatcher<T> extends PendingGate {
  private readonly limit: LimitFunction;
  private readonly chains = new OrderingChains();

  /**
   * `concurrency` bounds the database work; up to `capacity` deliveries may be pending
   * in all (running, waiting for their key, or being acked).
   */
  constructor(
    concurrency: number,
    capacity: number,
    /** Runs under the concurrency limit; the function it returns (the broker part) runs outside it. */
    private readonly work: (delivery: Delivery<T>) => Promise<() => Promise<DeliveryOutcome>>,
    private readonly skip: (delivery: Delivery<T>) => Promise<DeliveryOutcome>,
  ) {
    super(capacity);
    this.limit = pLimit(concurrency);
  }

  dispatch(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    const key = delivery.orderingKey;
    this.enter();
    if (key === undefined) return this.runCounted(delivery);
    const seq = this.chains.next();
    const promise = this.runInOrder(delivery, key, seq, this.chains.tail(key));
    this.chains.extend(key, promise);
    return promise;
  }

  // Written as plain async functions (not promise chains): a handful fewer promises and
  // closures per delivery, which shows at thousands of deliveries a second.
  private async runInOrder(
    delivery: Delivery<T>,
    key: string,
    seq: number,
    before: Promise<unknown> | undefined,
  ): Promise<DeliveryOutcome> {
    try {
      if (before !== undefined) await before;
      if (this.chains.isHeld(key, seq)) {
        return await this.skip(delivery).catch((): DeliveryOutcome => 'unsettled');
      }
      const outcome = await this.run(delivery);
      if (holdsOrder(outcome)) this.chains.hold(key);
      return outcome;
    } finally {
      this.leave();
    }
  }

  private async runCounted(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    try {
      return await this.run(delivery);
    } finally {
      this.leave();
    }
  }

  private async run(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    try {
      const settle = await this.limit(() => this.work(delivery));
      return await settle();
    } catch {
      return 'unsettled';
    }
  }
}
