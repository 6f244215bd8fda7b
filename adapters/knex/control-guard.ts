// Statements that end the claim's transaction, sent through the handler's trx. Knex sends
// what trx.raw is given: a ROLLBACK after the library's last statement would leave the
// bridge's COMMIT answered with a warning and the tag COMMIT, on nothing (the claim gone,
// the message acked). Knex emits its 'query' event synchronously, inside the promise
// that would send the statement, so a listener that throws refuses it before it is sent.
import type { Knex } from 'knex';
import { TransactionControlError } from '../../src/errors.js';
import { controlRefusal } from '../../src/tx/guard.js';

/** What Knex's 'query' event carries: a builder's or raw's has its `method`. */
interface KnexQueryEvent {
  readonly sql?: unknown;
  readonly method?: unknown;
}

/**
 * Refuses, from now on, every statement of a query builder or `trx.raw` on `trx` that
 * ends or replaces the transaction (BEGIN, COMMIT, ROLLBACK, END, ABORT, PREPARE
 * TRANSACTION; savepoints are allowed). Knex's own transaction statements (those of
 * `trx.commit()`/`rollback()`, sent as bare text, without a method) are left to Knex:
 * refusing one would make Knex give the connection back with the transaction open.
 */
export function refuseTransactionControl(trx: Knex.Transaction): void {
  trx.on('query', (query: KnexQueryEvent) => {
    if (query.method === undefined || typeof query.sql !== 'string') return;
    const refusal = controlRefusal(query.sql);
    if (refusal !== undefined) throw refusal;
  });
}

/**
 * While the handler runs, refuses its `trx.commit()` and `trx.rollback()` before Knex
 * sends anything: let through, the first commits the claim with half the effect and Knex
 * refuses what the handler writes after it (acked, the rest lost); the second makes the
 * attempt a failure the handler chose in a way the library cannot tell from a lost one.
 * Refused, the handler's attempt fails (or goes on inside the claim) and nothing of it
 * commits on its own. Returns the function that lifts the guard, before the bridge's own
 * `trx.commit()`; a nested `trx.transaction(…)` has its own, unguarded, commit.
 */
export function refuseHandlerEnds(trx: Knex.Transaction): () => void {
  const refuse = (call: 'commit' | 'rollback') => () =>
    Promise.reject(
      new TransactionControlError(
        `trx.${call}() inside the handler would end the claim's transaction; return (or throw) instead`,
        { call },
      ),
    );
  const original = { commit: trx.commit.bind(trx), rollback: trx.rollback.bind(trx) };
  Object.assign(trx, { commit: refuse('commit'), rollback: refuse('rollback') });
  return () => Object.assign(trx, original);
}
