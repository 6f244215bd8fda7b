// The server's answer inside what postgres.js (alone, or under Drizzle) rejects with,
// shaped as node-postgres reports one ({code: SQLSTATE, severity}), so the claim's driver
// tells a known outcome from a lost connection the same way for every layer.

/** A pg-shaped server error: what `DataLayer.serverError` gives when the server answered. */
export interface ServerAnswer {
  readonly code: string;
  readonly severity: string;
  readonly message: string;
}

/** SQLSTATE in_failed_sql_transaction: what made the server answer COMMIT with ROLLBACK. */
const IN_FAILED_TRANSACTION = '25P02';

/**
 * The error of a server that answered COMMIT with ROLLBACK (the transaction was aborted by
 * a statement that failed, one the code caught): a known rollback, so it carries the
 * SQLSTATE and severity of the statement error that aborted it, `cause` the driver's own.
 */
export function rolledBackAtCommit(cause: unknown): Error & ServerAnswer {
  return Object.assign(
    new Error('The server answered COMMIT with ROLLBACK: the transaction was aborted', { cause }),
    { code: IN_FAILED_TRANSACTION, severity: 'ERROR' },
  );
}

/**
 * Whether `error` is an answer of the server's: postgres.js's `PostgresError` and pg's
 * `DatabaseError` both carry the SQLSTATE as `code` and the severity (`ERROR`, `FATAL`…);
 * errors made on the client (postgres.js's `CONNECTION_CLOSED`, its client-side `57014`
 * for a query taken out of the queue, pg's "Connection terminated") carry no severity.
 */
export function isServerAnswer(error: unknown): error is ServerAnswer {
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as { code?: unknown }).code === 'string' &&
    typeof (error as { severity?: unknown }).severity === 'string'
  );
}

/**
 * The server's answer inside a postgres.js rejection, or the rejection as it is:
 * - a `PostgresError` is the server's answer already (a FATAL one too: a backend ended by
 *   the server, which leaves the outcome of a COMMIT in flight open);
 * - `TRANSACTION_ROLLED_BACK` comes only after the server confirmed a rollback (COMMIT
 *   answered ROLLBACK, or `sql.rollback()` ran), never from a COMMIT whose answer was lost;
 * - `QUERY_TIMEOUT` (the `query_timeout` option) carries the server's `57014` as `cause`
 *   when the cancel reached the server, and a client error when it did not;
 * - `CONNECTION_CLOSED` carries as `cause` the FATAL the server sent before it closed the
 *   session, when it sent one (25P03 idle in transaction too long, 57P01 terminated):
 *   that FATAL is given, as pg gives it, so the driver can settle a 25P03/25P04 by the
 *   claim's xid; a FATAL is never read as a known rollback. Without one (a socket that
 *   died, `ENDED`, `DESTROYED`) the error stays as it is: no answer, outcome unknown.
 */
export function postgresServerError(error: unknown): unknown {
  if (isServerAnswer(error)) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const cause = (error as { cause?: unknown } | null)?.cause;
  if (code === 'TRANSACTION_ROLLED_BACK') return rolledBackAtCommit(error);
  if (code === 'QUERY_TIMEOUT' && isServerAnswer(cause)) return cause;
  if (code === 'CONNECTION_CLOSED' && isServerAnswer(cause) && cause.severity !== 'ERROR')
    return cause;
  return error;
}
