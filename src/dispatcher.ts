import pLimit, { type LimitFunction } from 'p-limit';
import { holdsOrder, OrderingChains } from './ordering.js';
import { PendingGate } from './pending-gate.js';
import type { Delivery, DeliveryOutcome } from './types.js';

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
    return this.track(promise);
  }
}
