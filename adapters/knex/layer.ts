// Knex's transactions as a door needs them. `knex.transaction(async (trx) => …)` acquires
// one connection, sends BEGIN, runs the handler, and sends COMMIT when the handler's
// promise resolves (ROLLBACK when it rejects); the promise it returns settles once that
// answered, with the handler's value or the failure (pg's own error object: Knex prefixes
// its message with the statement, nothing else). Knex retries nothing: no transaction
// is re-run, no statement re-sent. What this bridge adds is what Knex's callback form
// does not report as such: a handler that ended the transaction itself, and a COMMIT
// Postgres answered with ROLLBACK (see run()).
import type { Knex } from 'knex';
import type { DataLayer, SqlResult, SqlRunner } from '../../src/data-layer.js';
import { TransactionControlError } from '../../src/errors.js';
import { refuseHandlerEnds, refuseTransactionControl } from './control-guard.js';
import { toKnexRaw } from './placeholders.js';

/**
 * The `queryContext` of every statement the library runs through Knex: a
 * `postProcessResponse` hook of the knex instance receives it, and must return those
 * results (node-postgres's `{ rows, rowCount, … }`) as they are.
 */
export const LIBRARY_QUERY_CONTEXT = Object.freeze({ effectivelyOnce: true });

/**
 * The claim transaction for Knex 3 over Postgres (`client: 'pg'`): the handler's
 * `ctx.tx` is the `Knex.Transaction` of `knex.transaction(…)`, so the effect is written
 * with Knex's own query builder (`trx('payments').insert(…)`), in the claim's
 * transaction. The library's statements run through `trx.raw`.
 *
 * Do not call `trx.commit()` or `trx.rollback()` in a handler: the library commits the
 * claim with the effect. A handler that does is reported as a transaction the handler
 * ended, never as one the library committed (nor as one known to be rolled back).
 *
 * @param knex - A Knex instance over Postgres (not a transaction: its "commit" would be
 *   a savepoint's release, which commits nothing).
 * @returns The data layer to pass as a door's `dataLayer` option.
 */
export function knexLayer(knex: Knex): DataLayer<Knex.Transaction> {
  if (knex.isTransaction === true) {
    throw new TypeError(
      'knexLayer(knex) needs the knex instance, not a transaction: a nested Knex transaction is a savepoint, and its commit commits nothing',
    );
  }
  // Knex's node-postgres client only: CockroachDB's and pg-native's share its dialect name
  // but not the server functions or the result objects the library reads.
  const driver = (knex.client as { driverName?: unknown }).driverName;
  if (driver !== 'pg') {
    throw new TypeError(
      `knexLayer(knex) needs a Knex over Postgres with node-postgres (client 'pg'); this one's driver is ${String(driver)}`,
    );
  }
  return {
    name: 'knex',
    // Knex has no transaction time limit of its own to set (none is shorter than the
    // door's), and its pool's acquireConnectionTimeout (60 s by default) belongs to the
    // instance, not to one call: the door bounds its own wait for the body to start and
    // rolls back a transaction that opens after it gave up.
    transaction: (_settings, body) => run(knex, body),
    sql: runner,
    serverError,
  };
}

/** Raised when the handler ended the transaction itself (`trx.commit()`/`rollback()`). */
class TransactionEndedByHandlerError extends Error {
  override readonly name = 'TransactionEndedByHandlerError';
}

/** The transactions this bridge ends (or lets Knex end) once their body settled. */
const endedByBridge = new WeakSet<Knex.Transaction>();

type Settled<T> = { ok: true; value: T } | { ok: false; error: unknown };

function settle<T>(promise: Promise<T>): Promise<Settled<T>> {
  return promise.then(
    (value) => ({ ok: true, value }),
    (error: unknown) => ({ ok: false, error }),
  );
}

/** `knex.transaction` around `body`, reporting what Knex's promise alone would not. */
async function run<T>(knex: Knex, body: (tx: Knex.Transaction) => Promise<T>): Promise<T> {
  let bodyOutcome: Promise<Settled<T>> | undefined;
  let endedByHandler = false;
  let commitAnswer: unknown;
  const knexOutcome = settle(
    knex.transaction(async (trx: Knex.Transaction) => {
      refuseTransactionControl(trx);
      const lift = refuseHandlerEnds(trx);
      bodyOutcome = settle(Promise.resolve().then(() => body(trx)));
      const outcome = await bodyOutcome;
      lift();
      // The handler's trx.commit()/rollback() already ended it: Knex settled its promise
      // then (before body did) and gave the connection back; what it would send now
      // (COMMIT or ROLLBACK) it refuses as "already complete".
      if (trx.isCompleted()) endedByHandler = true;
      else endedByBridge.add(trx);
      if (!outcome.ok) throw outcome.error;
      if (!endedByHandler) {
        // Knex's own COMMIT would not tell what Postgres answered: an aborted transaction
        // (a statement's error the handler swallowed) gets the tag ROLLBACK, no error, and
        // Knex would resolve. Committing here returns Knex's query object with pg's result;
        // after it Knex's own COMMIT is refused as "already complete", silently.
        commitAnswer = await trx.commit(outcome.value);
      }
      return outcome.value;
    }),
  );
  const knexResult = await knexOutcome;
  // Knex settles early when the handler ended the transaction: wait for body anyway, so
  // this never settles while the library still runs inside it.
  const bodyResult = bodyOutcome === undefined ? undefined : await bodyOutcome;
  if (endedByHandler) {
    throw new TransactionEndedByHandlerError(
      'the handler ended the Knex transaction itself (trx.commit() or trx.rollback()): whether its work committed is not known here',
      { cause: bodyResult?.ok === false ? bodyResult.error : undefined },
    );
  }
  if (knexResult.ok) {
    const tag = commandTag(commitAnswer);
    if (tag === 'COMMIT') return knexResult.value;
    if (tag === 'ROLLBACK') throw new CommitRolledBackError();
    throw new Error(
      `COMMIT's answer is not readable from Knex (command ${String(tag)}): whether it committed is not known here`,
    );
  }
  // body rejected: Knex sent ROLLBACK. When that failed too (the connection is gone),
  // Knex rejects with ROLLBACK's error; nothing committed either way, and body's reason
  // is the one the door gave.
  if (bodyResult !== undefined && !bodyResult.ok) throw bodyResult.error;
  throw knexResult.error;
}

/**
 * COMMIT answered with the tag ROLLBACK: the transaction had failed before (a statement's
 * error caught and ignored), nothing committed. Shaped as the server's error Postgres
 * gives a statement in such a transaction (25P02), so it reads as a known rollback.
 */
class CommitRolledBackError extends Error {
  override readonly name = 'CommitRolledBackError';
  readonly code = '25P02';
  readonly severity = 'ERROR';
  constructor() {
    super(
      'COMMIT was answered ROLLBACK: the transaction had already failed (a statement error was caught and ignored); nothing committed',
    );
  }
}

/** The command tag of pg's result in the query object `trx.commit()` resolves with. */
function commandTag(answer: unknown): unknown {
  const response = (answer as { response?: { command?: unknown } } | null | undefined)?.response;
  return response?.command;
}

function runner(trx: Knex.Transaction): SqlRunner {
  return {
    async query<R extends object = Record<string, unknown>>(
      text: string,
      values: readonly unknown[] = [],
    ): Promise<SqlResult<R>> {
      if (trx.isCompleted()) {
        // Knex would refuse it as "already complete"; say whose doing that was.
        throw endedByBridge.has(trx)
          ? new TransactionControlError('the Knex transaction is over; nothing more runs in it')
          : new TransactionControlError(
              'the handler ended the Knex transaction itself (trx.commit() or trx.rollback()): the library statement did not run',
              { endedByHandler: true },
            );
      }
      const { sql, bindings } = toKnexRaw(text, values);
      const result: unknown = await trx
        .raw(sql, bindings as Knex.RawBinding[])
        .queryContext(LIBRARY_QUERY_CONTEXT);
      return pgResult<R>(result, text);
    },
  };
}

/** node-postgres's result, as Knex's raw hands it back for one statement. */
function pgResult<R>(result: unknown, text: string): SqlResult<R> {
  const r = result as { rows?: unknown; rowCount?: unknown } | null;
  if (r === null || typeof r !== 'object' || !Array.isArray(r.rows)) {
    throw new TypeError(
      `Knex returned no node-postgres result for the library's statement (a postProcessResponse hook must return results whose queryContext is { effectivelyOnce: true } unchanged): ${text.slice(0, 200)}`,
    );
  }
  return {
    rows: r.rows as R[],
    rowCount: typeof r.rowCount === 'number' ? r.rowCount : null,
  };
}

/**
 * Knex rethrows node-postgres's own error (its message prefixed with the statement), so
 * a server's answer is the error itself: `code` a SQLSTATE, `severity` set (as is the
 * bridge's CommitRolledBackError). Anything else (a lost socket's error, Knex's pool
 * timeout, a handler-ended transaction) is returned as it is.
 */
function serverError(error: unknown): unknown {
  return error;
}
