// What Kysely (over node-postgres) throws, read as the library needs it: a server's
// answer (known outcome) or not (unknown). Kysely passes pg's DatabaseError through as
// pg threw it (its connection only appends its own stack), `code` and `severity` on it;
// a lost connection is pg's plain Error, with neither, and stays as it is.

/** Where Kysely marks its AbortedTransactionError (0.28.x), read without importing Kysely's. */
const ABORTED = Symbol.for('kysely.AbortedTransactionError');

/**
 * The server answered COMMIT with ROLLBACK (the transaction had failed: SQLSTATE 25P02,
 * `in_failed_sql_transaction`), which Kysely reports as its AbortedTransactionError
 * rather than an error of the server's: a known rollback.
 */
export class RolledBackAtCommit extends Error {
  readonly code = '25P02';
  readonly severity = 'ERROR';
  constructor(cause: unknown) {
    super('COMMIT was answered with ROLLBACK: the transaction had failed', { cause });
    this.name = 'RolledBackAtCommit';
  }
}

/** {@link DataLayer.serverError} for Kysely over node-postgres. */
export function kyselyServerError(error: unknown): unknown {
  if (typeof error === 'object' && error !== null && ABORTED in error)
    return new RolledBackAtCommit(error);
  return error;
}
