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
import { ConfigurationError } from '../../src/errors.js';
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
 * `options.pool` is the pg `Pool` given to `db`'s `PostgresDialect`: the bridge gives
 * each client Kysely checks out of it an `error` listener. node-postgres emits a
 * connection's loss on the client (a backend the library ends when a handler times out,
 * a server restart), and neither Kysely nor pg-pool listens on a checked-out client, so
 * without it that loss is an uncaught `error` event: a crash. The statement in flight
 * still fails, and pg-pool drops the dead client at its release.
 *
 * @example
 * ```ts
 * const pool = new pg.Pool({ connectionString });
 * pool.on('error', (err) => logger.warn({ err }, 'idle pg client lost')); // as pg's docs ask
 * const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
 * const dataLayer = kyselyLayer(db, { pool });
 * ```
 * @throws ConfigurationError when `options.pool` is not a pg Pool.
 */
export function kyselyLayer<DB>(
  db: Kysely<DB>,
  options: KyselyLayerOptions,
): DataLayer<Transaction<DB>> {
  watchCheckouts(options?.pool);
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

/** What {@link kyselyLayer} needs besides the Kysely instance. */
export interface KyselyLayerOptions {
  /** The pg `Pool` given to the Kysely instance's `PostgresDialect` (not the library's `pool`). */
  readonly pool: KyselyPgPool;
}

/** A pg `Pool`, as far as the bridge uses it: its `acquire` event (pg-pool's, on every checkout). */
export interface KyselyPgPool {
  /** pg-pool's checkout event, where the bridge adds its 'error' listener. */
  on(event: 'acquire', listener: (client: KyselyPgClient) => void): unknown;
}

/** A pg client, as far as the bridge uses it: its `error` event. */
export interface KyselyPgClient {
  /** pg's client error event: a lost connection, seen while no query runs. */
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/** The pools whose checkouts are watched, and the clients given a listener. */
const watchedPools = new WeakSet<object>();
const watchedClients = new WeakSet<object>();

/**
 * Gives every client checked out of `pool` (before Kysely gets it) an `error` listener,
 * once, for the client's life: the loss may be emitted after Kysely released it.
 */
function watchCheckouts(pool: KyselyPgPool | undefined): void {
  if (typeof pool !== 'object' || pool === null || typeof pool.on !== 'function')
    throw new ConfigurationError(
      'dataLayer',
      "kyselyLayer(db, { pool }) takes the pg Pool given to db's PostgresDialect",
    );
  if (watchedPools.has(pool)) return;
  watchedPools.add(pool);
  pool.on('acquire', (client) => {
    if (watchedClients.has(client)) return;
    watchedClients.add(client);
    // The loss reaches the statement in flight (and Kysely's ROLLBACK) as its failure;
    // this event only repeats it, and pg-pool drops the client at its release.
    client.on('error', () => undefined);
  });
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
