import type { DeliveryOutcome } from '../types.js';

/**
 * Outcomes after which a delivery that ran leaves its ordering key "open": the message
 * went back to the broker and will come again, so later messages of the key that were
 * already received must not overtake it.
 */
export function holdsOrder(outcome: DeliveryOutcome): boolean {
  return outcome === 'retry' || outcome === 'unsettled' || outcome === 'released';
}

/**
 * Sequencing and holds per ordering key. Every delivery gets a dispatch number; work of
 * one key runs in dispatch order (`tail`/`extend`). When a delivery that ran goes back
 * to the broker, `hold` marks every delivery of its key dispatched until then: those
 * were received before it returns and are released instead of run. Deliveries
 * dispatched later are redeliveries in the broker's order and run normally, so a hold
 * can never feed on itself.
 */
export class OrderingChains {
  private readonly tails = new Map<string, Promise<unknown>>();
  private readonly holdThrough = new Map<string, number>();
  private seq = 0;

  /** Number for a delivery being dispatched now. */
  next(): number {
    return ++this.seq;
  }

  /** Settles after the latest work of `key` dispatched so far; undefined when none is pending. */
  tail(key: string): Promise<unknown> | undefined {
    return this.tails.get(key);
  }

  /** Makes `work` the new tail of `key`; forgets the key (and its hold) once all its work settled. */
  extend(key: string, work: Promise<unknown>): void {
    this.tails.set(key, work);
    void work.then(() => {
      if (this.tails.get(key) !== work) return;
      this.tails.delete(key);
      this.holdThrough.delete(key);
    });
  }

  /** A delivery of `key` went back to the broker: hold everything of `key` dispatched so far. */
  hold(key: string): void {
    this.holdThrough.set(key, this.seq);
  }

  /** Whether the delivery numbered `seq` of `key` must be released to keep order. */
  isHeld(key: string, seq: number): boolean {
    return seq <= (this.holdThrough.get(key) ?? 0);
  }
}
