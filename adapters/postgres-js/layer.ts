import type postgres from 'postgres';
import type { Sql, TransactionSql } from 'postgres';
import type {
  DataLayer,
  LayerTransactionSettings,
  SqlResult,
  SqlRunner,
} from '../../src/data-layer.js';
import { guardPostgresTx } from './control-guard.js';
import { postgresServerError } from './server-error.js';

/**
 * The library's statements on a postgres.js transaction (or instance): `sql.unsafe` with
 * the values as its parameters (never in the text), unprepared (postgres.js's default for
 * `unsafe`, which also suits a pooler in transaction mode), and `.transform(false)` so an
 * instance made with `transform: postgres.camel` still hands back the columns the library
 * named. `count` is postgres.js's rowCount.
 */
export function postgresRunner(sql: Pick<Sql, 'unsafe'>): SqlRunner {
  return {
    async query<R extends object>(text: string, values: readonly unknown[] = []) {
      // pg sends undefined as NULL; postgres.js refuses it (UNDEFINED_VALUE).
      const parameters = values.map((value) => (value === undefined ? null : value));
      const result = await sql
        .unsafe(text, parameters as postgres.ParameterOrJSON<never>[])
        .transform(false);
      return {
        rows: [...result] as unknown as R[],
        rowCount: result.count ?? null,
      } satisfies SqlResult<R>;
    },
  };
}

/**
 * The claim's transaction as postgres.js opens one: `sql.begin(fn)`, which sends BEGIN,
 * runs `fn` with the transaction's `sql`, sends COMMIT when it resolves and ROLLBACK when
 * it rejects, retries nothing, and rejects when the server answers COMMIT with ROLLBACK
 * (`TRANSACTION_ROLLED_BACK`) or when any statement of the transaction failed, caught or
 * not (with the statement's error, in place of the body's 25P02 that followed it). When
 * the connection closes it rejects at once, with the connection's error (the server's
 * FATAL when it sent one), even while the body still runs. The door's wait for a connection bounds the wait in postgres.js's queue
 * (`Leasing.signal`); once it has its connection the signal does nothing.
 */
export function postgresLayer<TTypes extends Record<string, unknown>>(
  sql: Sql<TTypes>,
): DataLayer<TransactionSql<TTypes>> {
  return {
    name: 'postgres-js',
    transaction<T>(
      settings: LayerTransactionSettings,
      body: (tx: TransactionSql<TTypes>) => Promise<T>,
    ): Promise<T> {
      // The handler's tx refuses raw transaction control (control-guard.ts).
      const begun = sql.begin((tx) => body(guardPostgresTx(tx)));
      const bounded =
        settings.acquireTimeoutMs > 0
          ? begun.signal(AbortSignal.timeout(settings.acquireTimeoutMs))
          : begun;
      // postgres.js types an array result as unwrapped element by element; an async
      // body's value is what it resolved with, arrays included, which is T.
      return bounded as Promise<unknown> as Promise<T>;
    },
    sql: (tx) => postgresRunner(tx),
    serverError: postgresServerError,
  };
}
