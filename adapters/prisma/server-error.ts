// Where Postgres's answer sits inside what Prisma 7 throws over `@prisma/adapter-pg`, read
// from @prisma/adapter-pg, @prisma/driver-adapter-utils and @prisma/client's runtime:
// - adapter-pg turns every pg `DatabaseError` (a message, a `code`, a `severity`) into a
//   `DriverAdapterError` whose `cause` is a plain object: `originalCode` (the SQLSTATE) and
//   `originalMessage`, plus a `kind` (`TransactionWriteConflict` for 40001/40P01,
//   `UniqueConstraintViolation` for 23505…); only the catch-all kind `postgres` keeps the
//   server's `severity` (`code`, `severity`, `message`). Socket errors (ECONNRESET…) become
//   kinds with no SQLSTATE (`ConnectionClosed`, `SocketTimeout`, `DatabaseNotReachable`);
//   any other error (pg's "Connection terminated unexpectedly") is thrown as it is.
// - The client wraps a statement's `DriverAdapterError` in a
//   `PrismaClientKnownRequestError` (P2010 for a raw query, P2034 for a write conflict,
//   P2002…) with the `DriverAdapterError` in `meta.driverAdapterError`; COMMIT's failure
//   comes out of `$transaction` as the bare `DriverAdapterError`.

/** A Postgres error as node-postgres reports it: what the library's error rules read. */
export interface PgServerError {
  /** The SQLSTATE. */
  readonly code: string;
  /** `ERROR`, `FATAL` or `PANIC`. */
  readonly severity: string;
  /** The server's message. */
  readonly message: string;
}

/** What adapter-pg puts in a `DriverAdapterError`'s `cause`. */
interface AdapterErrorCause {
  kind?: unknown;
  originalCode?: unknown;
  originalMessage?: unknown;
  code?: unknown;
  severity?: unknown;
  message?: unknown;
}

// The SQLSTATEs adapter-pg maps to a kind of its own (dropping the severity) that the
// server sends as FATAL: each ends a connection being opened (authentication, a missing
// database, too many connections). Every other mapped kind is a statement's ERROR.
const FATAL_MAPPED = new Set(['28000', '28P01', '3D000', '53300']);

const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * The Postgres error inside `error`, shaped as node-postgres reports it, or `error` as it
 * is when it holds no answer of the server's (a lost connection, a socket's or a pool's
 * error, Prisma's own transaction errors such as P2028).
 */
export function prismaServerError(error: unknown): unknown {
  if (isPgShaped(error)) return error;
  const cause = adapterCause(error);
  if (cause === undefined) return error;
  const code = typeof cause.originalCode === 'string' ? cause.originalCode : cause.code;
  if (typeof code !== 'string' || !SQLSTATE.test(code)) return error;
  const severity =
    typeof cause.severity === 'string' && cause.severity !== 'N/A'
      ? cause.severity
      : FATAL_MAPPED.has(code)
        ? 'FATAL'
        : 'ERROR';
  const message =
    typeof cause.originalMessage === 'string'
      ? cause.originalMessage
      : typeof cause.message === 'string'
        ? cause.message
        : error instanceof Error
          ? error.message
          : String(code);
  return { code, severity, message } satisfies PgServerError;
}

/** pg's own `DatabaseError` (or anything shaped like one), passed through untouched. */
function isPgShaped(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof severity === 'string' && typeof code === 'string' && SQLSTATE.test(code);
}

/**
 * The `cause` of the `DriverAdapterError` that `error` is or wraps (in
 * `meta.driverAdapterError`, or down an `Error.cause` chain).
 */
function adapterCause(error: unknown): AdapterErrorCause | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const candidate = current as { name?: unknown; cause?: unknown; meta?: unknown };
    if (
      candidate.name === 'DriverAdapterError' &&
      typeof candidate.cause === 'object' &&
      candidate.cause !== null
    ) {
      return candidate.cause;
    }
    const wrapped = (candidate.meta as { driverAdapterError?: unknown } | undefined)
      ?.driverAdapterError;
    current = wrapped ?? candidate.cause;
  }
  return undefined;
}
