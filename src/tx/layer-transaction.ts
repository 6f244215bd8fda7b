import type { DataLayer } from '../data-layer.js';
import { DatabaseError } from '../errors.js';
import type { IsolationLevel } from '../store/claim.js';
import type { ConnectionDeps } from './claim-connection.js';
import type { ClaimTransactions } from './claim-transaction.js';

// The claim transaction inside a data layer's own transaction (`prisma.$transaction`,
// `knex.transaction`, `sql.begin`…): see src/data-layer.ts and ARCHITECTURE.md.

/** What a layer's claim transactions need from their owner besides a pool's deps. */
export interface LayerDeps extends ConnectionDeps {
  /** Set by the transaction's first statement (`SET TRANSACTION ISOLATION LEVEL`). */
  readonly isolationLevel: IsolationLevel | undefined;
  /** The door's limit on the work inside the transaction, in ms (0: none): the layer's own limit is set from it. */
  readonly timeoutMs: number;
}

/**
 * The claim transactions of a data layer: each one the layer opens in its own idiom,
 * the claim found inside it (its statements one per call through `layer.sql(tx)`), and
 * `deps.pool` kept for what must run on another connection (a cancel, the settling of
 * a COMMIT whose answer was lost).
 */
export function layerClaimTransactions<Tx>(
  layer: DataLayer<Tx>,
  deps: LayerDeps,
): ClaimTransactions<Tx> {
  return {
    hardStop: deps.hardStop,
    claimBegins: false,
    // Filled in by the next commit: until then no door hands a data layer here.
    open: async (key) => ({
      kind: 'failed',
      error: new DatabaseError('connect', new Error(`${layer.name}: not wired yet`), { key }),
      infrastructure: true,
      conflict: false,
    }),
  };
}
