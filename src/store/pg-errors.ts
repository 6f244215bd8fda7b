/**
 * What a Postgres error says about the transaction and the connection. The rule the
 * runners live by: an error the server answered with a SQLSTATE at severity ERROR
 * leaves the session usable and the outcome known (the transaction rolled back); only
 * a connection that died (no answer, or a FATAL / PANIC one) leaves it unknown. One
 * ERROR is not the statement's: 25006 on a node that cannot take writes.
 */

/** `lock_timeout` expired while the claim waited for another delivery of its key. */
export const LOCK_NOT_AVAILABLE = '55P03';
/** A statement ran in a transaction that an earlier error had aborted. */
export const IN_FAILED_TRANSACTION = '25P02';
/**
 * A write in a read-only transaction: the session is on a hot standby, a demoted
 * primary, or a server whose sessions start read-only (`default_transaction_read_only`).
 */
export const READ_ONLY_SQL_TRANSACTION = '25006';

/**
 * The server ended the session because its transaction sat idle longer than
 * `idle_in_transaction_session_timeout` (sent as FATAL, before the socket closes).
 */
export const IDLE_IN_TRANSACTION_TIMEOUT = '25P03';
/** The server ended the session because its transaction outlasted `transaction_timeout` (Postgres 17+). */
export const TRANSACTION_TIMEOUT = '25P04';

interface ServerErrorShape {
  code?: unknown;
  severity?: unknown;
}

/**
 * The SQLSTATE of an error the Postgres server sent (pg's `DatabaseError` carries a
 * `severity`; socket errors carry errno codes such as `EPIPE` and none).
 */
export function sqlstateOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const { code, severity } = error as ServerErrorShape;
  if (typeof severity !== 'string' || typeof code !== 'string') return undefined;
  return /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/**
 * The server answered with an ERROR: the statement failed, the session goes on. Not
 * 25006: the library's own writes failed because the session is on a node that takes
 * none (a standby, or a primary demoted in a failover), and so would every statement
 * after them on that connection. That is an outage, like a connection that died: the
 * connection is dropped, so the pool opens a fresh one (wherever DNS or the pooler
 * points by then), and no attempt is spent.
 */
export function isStatementError(error: unknown): boolean {
  const code = sqlstateOf(error);
  return (
    code !== undefined &&
    code !== READ_ONLY_SQL_TRANSACTION &&
    (error as ServerErrorShape).severity === 'ERROR'
  );
}

/**
 * Serialization failure (40001) or deadlock (40P01): the transaction lost a race and
 * the same work in a fresh transaction may well succeed.
 */
export function isSerializationFailure(error: unknown): boolean {
  const code = sqlstateOf(error);
  return code === '40001' || code === '40P01';
}

// SQLSTATE classes and codes that mean "the database is not there", as opposed to
// "this statement failed": connection exceptions (08), admin/crash shutdown (57P01-03),
// too many connections (53300), and a node that takes no writes (25006: a standby, or a
// primary demoted in a failover; see above).
const UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '53300', READ_ONLY_SQL_TRANSACTION]);
const UNAVAILABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** True when an error says the database is unreachable rather than a statement failing. */
export function isUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (
    typeof code === 'string' &&
    (UNAVAILABLE_CODES.has(code) || code.startsWith('08') || UNAVAILABLE_ERRNOS.has(code))
  ) {
    return true;
  }
  const message = error instanceof Error ? error.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(
    message,
  );
}

/**
 * The server ended the session because of its transaction's own idleness or length
 * (25P03, 25P04): the transaction's doing, not an outage. A handler slower than the
 * server allows fails this way every time, so it must spend an attempt; filed as an
 * outage it would be retried for ever.
 */
export function isTransactionTimeout(error: unknown): boolean {
  const code = sqlstateOf(error);
  return code === IDLE_IN_TRANSACTION_TIMEOUT || code === TRANSACTION_TIMEOUT;
}
