/**
 * `effectively-once/kysely`: the claim transaction opened by Kysely
 * (`db.transaction().execute(…)`), so a handler's `ctx.tx` is a Kysely `Transaction`
 * and the effect is written with Kysely's query builder, in the claim's transaction.
 * For Kysely over node-postgres (`PostgresDialect`). `kysely` is an optional peer
 * dependency: only this entry point loads it.
 * @packageDocumentation
 * @module effectively-once/kysely
 */
import { CompiledQuery, type Kysely, type Transaction } from 'kysely';
import type {
  DataLayer,
  LayerTransactionSettings,
  SqlResult,
  SqlRunner,
} from '../../src/data-layer.js';
import { guardedTransaction } from './guard.js';
import { kyselyServerError } from './server-error.js';

/**
 * The data layer of a Kysely instance over node-postgres (`PostgresDialect` on a
 * `pg.Pool`), for a door's `dataLayer` option: the door's claim transaction is
 * `db.transaction().execute(…)`, and the handler's `ctx.tx` is that `Transaction<DB>`,
 * used as Kysely's docs show (`ctx.tx.insertInto('orders').values(…).execute()`). The
 * library's own statements run on the same transaction, with `db`'s plugins left out
 * (a `CamelCasePlugin` renames no column the library reads).
 *
 * `ctx.tx` refuses what would end the claim's transaction (`COMMIT` or `ROLLBACK` in a
 * `sql` template; savepoints are allowed) and every statement once the transaction's
 * work is over (before Kysely sends COMMIT), so nothing the handler left running lands
 * after COMMIT, outside the claim.
 * Both checks are a Kysely plugin: `ctx.tx.withoutPlugins()` and an already compiled
 * query passed to `ctx.tx.executeQuery` skip them. Kysely refuses `ctx.tx.transaction()`
 * itself (a Kysely transaction does not nest).
 *
 * Give each checked-out pg client an `error` listener
 * (`pool.on('connect', (client) => client.on('error', …))`): node-postgres emits a
 * connection's loss on the client, and Kysely listens on none, so a backend ended
 * while a handler runs would otherwise be an uncaught `error` event.
 */
export function kyselyLayer<DB>(db: Kysely<DB>): DataLayer<Transaction<DB>> {
  return {
    name: 'kysely',
    transaction<T>(
      // Kysely sets no limit of its own on a transaction or on a connection's checkout
      // (that is the pg pool's connectionTimeoutMillis): nothing to set from the door's.
      _settings: LayerTransactionSettings,
      body: (tx: Transaction<DB>) => Promise<T>,
    ): Promise<T> {
      let bodyFailed: { error: unknown } | undefined;
      return db
        .transaction()
        .execute((trx) =>
          guardedTransaction(trx, body).catch((error: unknown) => {
            bodyFailed = { error };
            throw error;
          }),
        )
        .catch((error: unknown) => {
          // Kysely throws ROLLBACK's failure (a connection gone) in place of the body's:
          // a body that threw committed nothing either way, and its error is the answer.
          throw bodyFailed ? bodyFailed.error : error;
        });
    },
    sql: (tx) => statementsOn(tx),
    serverError: kyselyServerError,
  };
}

/**
 * The library's statements on `tx`'s connection, inside its transaction (Kysely's
 * transaction executor keeps to the one connection, and refuses once the transaction
 * ended). Without plugins: the user's transform results (a `CamelCasePlugin` would
 * rename the columns the library reads), and the guard is for the handler's statements.
 */
function statementsOn<DB>(tx: Transaction<DB>): SqlRunner {
  const bare = tx.withoutPlugins();
  return {
    async query<R extends object = Record<string, unknown>>(
      text: string,
      values: readonly unknown[] = [],
    ): Promise<SqlResult<R>> {
      const result = await bare.executeQuery<R>(CompiledQuery.raw(text, [...values]));
      return {
        rows: result.rows,
        // Kysely reports affected rows for INSERT, UPDATE, DELETE and MERGE only.
        rowCount: result.numAffectedRows === undefined ? null : Number(result.numAffectedRows),
      };
    },
  };
}
