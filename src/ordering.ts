import type { DeliveryOutcome } from './types.js';

/**
 * Outcomes after which a delivery's ordering key is still "open": the message went
 * back to the broker and will come again, so a later message of the same key must not
 * overtake it. Such later messages are released instead of processed.
 */
export function holdsOrder(outcome: DeliveryOutcome): boolean {
  return outcome === 'retry' || outcome === 'unsettled' || outcome === 'released';
}

/**
 * Chains work per ordering key: each link waits for the previous link of every key it
 * touches and learns whether any of them left its key open.
 */
export class OrderingChains {
  private readonly tails = new Map<string, Promise<DeliveryOutcome>>();

  /** Outcomes of the previous links of `keys`; resolves once they have all settled. */
  previous(keys: Iterable<string>): Promise<Map<string, DeliveryOutcome>> {
    const entries = [...new Set(keys)].map(async (k) => [k, await (this.tails.get(k) ?? Promise.resolve<DeliveryOutcome>('processed'))] as const);
    return Promise.all(entries).then((pairs) => new Map(pairs));
  }

  /** Records `outcome` (a promise of the key's last outcome in this link) as the new tail of `key`. */
  extend(key: string, outcome: Promise<DeliveryOutcome>): void {
    this.tails.set(key, outcome);
    void outcome.then(() => {
      if (this.tails.get(key) === outcome) this.tails.delete(key);
    });
  }
}
