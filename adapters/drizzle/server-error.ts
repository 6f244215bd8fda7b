import { DrizzleQueryError } from 'drizzle-orm';
import { postgresServerError } from '../postgres-js/server-error.js';

/**
 * The server's answer inside what a Drizzle transaction rejects with. Drizzle wraps a
 * failed statement's driver error in `DrizzleQueryError` (its `cause`); under node-postgres
 * that includes the COMMIT Drizzle sends itself, under postgres.js COMMIT is postgres.js's
 * and comes unwrapped. The driver's error is then read as it reads itself: pg's
 * `DatabaseError` is pg-shaped already; postgres.js's errors as
 * `effectively-once/postgres-js` reads them (`TRANSACTION_ROLLED_BACK`, `QUERY_TIMEOUT`,
 * a FATAL inside `CONNECTION_CLOSED`). Anything else, unwrapped, as it is.
 */
export function drizzleServerError(error: unknown): unknown {
  let inner = error;
  while (inner instanceof DrizzleQueryError && inner.cause !== undefined) inner = inner.cause;
  return postgresServerError(inner);
}
