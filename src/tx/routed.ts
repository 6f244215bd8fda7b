import type { RouteTarget } from '../routing/options.js';
import { EffectivelyOnceError, RoutingError } from '../errors.js';
import type { Router } from '../routing/router.js';
import { handlersFault, type ClaimTransactions, type FailedAttempt } from './claim-transaction.js';

/** One database's claim transactions, by the database's name. */
export interface DatabaseTransactions<Tx> {
  readonly name: string;
  readonly transactions: ClaimTransactions<Tx>;
}

/**
 * The claim transactions of a door: its one database's, or, with a router, a set the
 * driver picks from per key ({@link ClaimTransactions.at}). A router's failure (a route
 * that threw, an unknown name, a key that changed database) fails the attempt as the
 * work's fault: nothing is claimed anywhere, and it is never mistaken for an outage.
 */
export function routedTransactions<Tx>(
  databases: ReadonlyArray<DatabaseTransactions<Tx>>,
  router: Router | undefined,
): ClaimTransactions<Tx> {
  const first = databases[0];
  if (first === undefined) throw new TypeError('effectively-once: a door needs a database');
  if (router === undefined) return first.transactions;
  const byName = new Map(databases.map((d) => [d.name, d.transactions]));
  return {
    hardStop: first.transactions.hardStop,
    claimBegins: first.transactions.claimBegins,
    // Only ever reached through `at`: the driver routes before it opens.
    open: (key) =>
      Promise.resolve(handlersFault(new RoutingError('opened without a route', { key }))),
    at(target: RouteTarget): ClaimTransactions<Tx> | FailedAttempt {
      // An adapter's in-transaction hook keeps the source's progress in the claim's
      // database (Kafka's offsets: 'postgres'), read back from one pool at assignment:
      // spread over several databases, that read could skip records. Refused, loudly.
      if (target.delivery?.inTransaction !== undefined)
        return handlersFault(
          new RoutingError(
            "a source that stores its progress in the claim's transaction (Kafka's offsets: 'postgres') cannot be routed",
            { key: target.key },
          ),
        );
      let name: string;
      try {
        name = router.route(target);
      } catch (error) {
        // Router.route throws its own errors only (it wraps the user's route's throw).
        return handlersFault(
          error instanceof EffectivelyOnceError
            ? error
            : new RoutingError('the router failed', { key: target.key }, error),
        );
      }
      return byName.get(name)!;
    },
  };
}
