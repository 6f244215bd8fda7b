// Statements that end the claim's transaction, sent through the handler's trx. Knex sends
// what trx.raw is given: a ROLLBACK after the library's last statement would leave the
// bridge's COMMIT answered with a warning and the tag COMMIT, on nothing (the claim gone,
// the message acked). Knex emits its 'query' event synchronously, inside the promise
// that would send the statement, so a listener that throws refuses it before it is sent.
import type { Knex } from 'knex';
import { TransactionControlError } from '../../src/errors.js';
import { isTransactionControl } from '../../src/tx/guard.js';

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
    if (isTransactionControl(query.sql)) {
      throw new TransactionControlError(
        'a statement that ends the transaction: the library commits the claim with the effect (throw to roll back; savepoints are allowed)',
        { sql: query.sql.slice(0, 200) },
      );
    }
  });
}
