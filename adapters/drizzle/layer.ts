import { entityKind, sql } from 'drizzle-orm';
import type { TablesRelationalConfig } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from 'drizzle-orm/pg-core';
import type { DataLayer, SqlResult, SqlRunner } from '../../src/data-layer.js';
import { ConfigurationError } from '../../src/errors.js';
import { rolledBackAtCommit } from '../postgres-js/server-error.js';
import { EndedConnection } from './ended-connection.js';
import { drizzleServerError } from './server-error.js';
import { drizzleStatement } from './statement.js';

/** What `tx.execute` resolves with: pg's `QueryResult` or postgres.js's `RowList`. */
type DriverResult =
  { rows?: unknown[]; rowCount?: number | null } | (unknown[] & { count?: number | null });

/** The two drivers' results as the library reads them. */
function normalized<R>(result: DriverResult): SqlResult<R> {
  if (Array.isArray(result)) return { rows: [...result] as R[], rowCount: result.count ?? null };
  return { rows: (result.rows ?? []) as R[], rowCount: result.rowCount ?? null };
}

/** The library's statements through `tx.execute`, its parameters as `sql.param`s. */
export function drizzleRunner(tx: {
  execute(query: ReturnType<typeof sql.raw>): PromiseLike<unknown>;
}): SqlRunner {
  return {
    async query<R extends object>(text: string, values: readonly unknown[] = []) {
      const result = await tx.execute(drizzleStatement(text, values));
      return normalized<R>(result as DriverResult);
    },
  };
}

/** The pg connection (a PoolClient, or the app's Client) under a node-postgres transaction. */
interface PgConnection {
  on(event: 'error', listener: (error: unknown) => void): unknown;
  removeListener(event: 'error', listener: (error: unknown) => void): unknown;
}

/** The Drizzle drivers the bridge knows, by their session's entity kind. */
const DRIVERS = { NodePgSession: 'node-postgres', PostgresJsSession: 'postgres-js' } as const;
type Driver = (typeof DRIVERS)[keyof typeof DRIVERS];

/**
 * Which driver `db` runs on, by the entity kind Drizzle gives its session class; another
 * driver's COMMIT, its answer and its connection's errors are unknown to the bridge.
 */
function driverOf(db: { _: { session: unknown } }): Driver {
  const session = db._.session as object | undefined;
  const kind = (session?.constructor as { [entityKind]?: unknown } | undefined)?.[entityKind];
  const driver = DRIVERS[kind as keyof typeof DRIVERS] as Driver | undefined;
  if (driver === undefined)
    throw new ConfigurationError(
      'dataLayer',
      'drizzleLayer takes a Drizzle database over node-postgres (drizzle-orm/node-postgres) ' +
        'or postgres.js (drizzle-orm/postgres-js)',
      { session: typeof kind === 'string' ? kind : undefined },
    );
  return driver;
}

/**
 * The pg connection under a node-postgres transaction (a PoolClient, or the app's
 * Client). Drizzle does not expose it: its session's `client`, as Drizzle 0.45 names it.
 */
function nodePgConnection(tx: { _: { session: unknown } }): PgConnection | undefined {
  const client = (tx._.session as { client?: Partial<PgConnection> }).client;
  return typeof client?.on === 'function' && typeof client.removeListener === 'function'
    ? (client as PgConnection)
    : undefined;
}

/**
 * COMMIT, sent by the bridge at the end of a node-postgres transaction's callback, and
 * its answer read. Drizzle sends its own COMMIT with pg and drops the answer, and pg
 * resolves a COMMIT the server answered with ROLLBACK (a statement failed and was caught,
 * or one kept running after the library's last) as if it committed: here ROLLBACK
 * rejects, a known rollback. Drizzle's COMMIT that follows finds no transaction (a
 * warning) and resolves; a COMMIT that fails rejects the callback, so Drizzle's ROLLBACK
 * follows and the transaction rejects with the failure.
 */
async function commitChecked(tx: {
  execute(query: ReturnType<typeof sql.raw>): PromiseLike<unknown>;
}): Promise<void> {
  const answer = (await tx.execute(sql.raw('COMMIT'))) as { command?: unknown };
  if (answer.command !== 'COMMIT') throw rolledBackAtCommit(answer.command);
}

/**
 * The claim's transaction as Drizzle opens one, `db.transaction(async (tx) => …)`, over
 * node-postgres or postgres.js: `ctx.tx` is that Drizzle transaction, typed as the app's
 * `db` types it (its schema included), so the effect is `tx.insert(table).values(…)`. The
 * library's statements go through `tx.execute`. Drizzle retries nothing; the isolation
 * level is the library's own first statement, so no transaction config is passed. Over
 * postgres.js, COMMIT and its answer are postgres.js's (`sql.begin`); over node-postgres
 * the bridge sends COMMIT itself to read its answer, and listens for the connection's
 * errors while the transaction is open.
 * @param db - The app's Drizzle database (`drizzle(pool)` / `drizzle({ client })`).
 * @throws ConfigurationError when `db` runs on another driver than these two.
 */
export function drizzleLayer<
  TQueryResult extends PgQueryResultHKT,
  TFullSchema extends Record<string, unknown>,
  TSchema extends TablesRelationalConfig,
>(
  db: PgDatabase<TQueryResult, TFullSchema, TSchema>,
): DataLayer<PgTransaction<TQueryResult, TFullSchema, TSchema>> {
  const driver = driverOf(db);
  return {
    name: 'drizzle',
    async transaction(_settings, body) {
      let connection: PgConnection | undefined;
      let lost: unknown;
      let bodyResolved = false;
      let bodyFailed: { error: unknown } | undefined;
      // pg emits 'error' on a checked-out connection the server ends while no query runs
      // on it (and again when its socket closes): with no listener that is an uncaught
      // error. Held until the transaction settled, past Drizzle's release.
      const onError = (error: unknown) => {
        lost ??= error;
      };
      try {
        return await db.transaction(async (tx) => {
          let ended: EndedConnection | undefined;
          if (driver === 'node-postgres') {
            connection = nodePgConnection(tx);
            connection?.on('error', onError);
            ended = new EndedConnection(tx._.session, db._.session);
          }
          const value = await body(tx)
            .catch((error: unknown) => {
              bodyFailed = { error };
              throw error;
            })
            .finally(() => ended?.end());
          bodyResolved = true;
          if (driver === 'node-postgres') await commitChecked(tx);
          return value;
        });
      } catch (error) {
        // Drizzle's ROLLBACK after a failed body, on a lost connection, rejects in its
        // place under node-postgres: nothing committed, and the body's error says why.
        if (bodyFailed !== undefined && driver === 'node-postgres') throw bodyFailed.error;
        // After the body resolved, on a connection pg lost, what Drizzle rejects with is
        // pg's refusal to use it ("not queryable"), or its ROLLBACK's: the server's FATAL
        // (25P03 idle in transaction too long, 57P01 terminated) says why.
        throw bodyResolved && lost !== undefined ? lost : error;
      } finally {
        connection?.removeListener('error', onError);
      }
    },
    sql: (tx) => drizzleRunner(tx),
    serverError: drizzleServerError,
  };
}
