// TypeORM wraps whatever its postgres query runner's `query` threw in a QueryFailedError
// (error/QueryFailedError.js): the pg error stays as `driverError`, and its own fields
// (code, severity, …) are copied onto the wrapper. The wrapper is told apart by shape,
// not `instanceof`, so this entry loads nothing of typeorm's at run time.

interface QueryFailedShape {
  readonly name: string;
  readonly driverError: unknown;
}

function isQueryFailed(error: unknown): error is QueryFailedShape {
  return (
    error instanceof Error &&
    error.name === 'QueryFailedError' &&
    'driverError' in error &&
    typeof error.driverError === 'object' &&
    error.driverError !== null
  );
}

/**
 * The error node-postgres raised inside an error TypeORM threw: a server's answer is pg's
 * `DatabaseError` (`code`: the SQLSTATE, `severity`: `ERROR`, or `FATAL` for a backend
 * the server ended), a dead socket is pg's or Node's error (no `severity`), both as pg
 * made them. Anything TypeORM raised on its own (a released query runner after the
 * connection died, a pool that gave no connection) carries no server answer and is
 * returned as it is.
 */
export function typeormServerError(error: unknown): unknown {
  return isQueryFailed(error) ? error.driverError : error;
}
