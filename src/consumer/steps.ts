import type { ClaimTransaction, WorkResult } from '../tx/claim-transaction.js';
import type { Delivery } from '../types.js';

// What the per-message runner (runner.ts) and the batch runner (batch-runner.ts) add to
// the user's work inside one claim transaction.

/**
 * Undoes, for the rest of this transaction only, what a handler may have set locally that
 * would make the library's own write fail every time: `SET LOCAL ROLE tenant` (the usual
 * row-level-security idiom; the tenant may not write the library's tables, so 42501 on
 * each redelivery, filed as infrastructure, looped for ever) and a short
 * `statement_timeout`. `SET LOCAL ROLE NONE` is the session user, as the claim ran
 * (`RESET ROLE` inside a transaction would outlive it at COMMIT). The hooks' tables are
 * schema-qualified, so `search_path` cannot misdirect them. One round trip, only when a
 * hook runs.
 */
const LIBRARY_SESSION_SQL = 'SET LOCAL ROLE NONE; SET LOCAL statement_timeout TO DEFAULT';
/** {@link LIBRARY_SESSION_SQL} one statement per call, for a data layer's transaction. */
const LIBRARY_SESSION_STATEMENTS = [
  'SET LOCAL ROLE NONE',
  'SET LOCAL statement_timeout TO DEFAULT',
];

/**
 * Runs the adapters' in-transaction hooks (e.g. Kafka offsets stored in Postgres) on
 * the raw client: they are the library's statements, not the handler's, so they run as
 * the library's role whatever the handler set locally (see LIBRARY_SESSION_SQL).
 */
export async function runAdapterHook(
  deliveries: ReadonlyArray<Delivery<unknown>>,
  conn: ClaimTransaction<unknown>,
): Promise<WorkResult> {
  try {
    if (deliveries.some((d) => d.inTransaction !== undefined)) {
      if (conn.pg !== undefined) await conn.pg.query(LIBRARY_SESSION_SQL);
      else for (const statement of LIBRARY_SESSION_STATEMENTS) await conn.client.query(statement);
    }
    for (const d of deliveries) {
      // No `await` of a missing hook: a microtask per delivery, a hundred per batch.
      if (d.inTransaction !== undefined) await d.inTransaction(conn.client, deliveries);
    }
    return { kind: 'ok' };
  } catch (error) {
    return { kind: 'hook-failed', error };
  }
}
