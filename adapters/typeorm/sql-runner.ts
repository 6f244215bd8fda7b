import type { EntityManager } from 'typeorm';
import type { SqlResult, SqlRunner } from '../../src/data-layer.js';
import { StateError } from '../../src/errors.js';
import { ConnectionErrorWatch } from './connection-error.js';

/**
 * The library's statements on the query runner of the transaction `manager` belongs to
 * (the one `dataSource.transaction` hands its callback): its connection, its
 * transaction. `queryRunner.query(text, values, true)` answers with TypeORM's structured
 * QueryResult (`records`: pg's rows, `affected`: pg's rowCount) instead of the
 * command-dependent raw shape.
 */
export function transactionSql(manager: EntityManager): SqlRunner {
  const runner = manager.queryRunner;
  // dataSource.manager (or any manager made without a query runner) takes a pool
  // connection per statement: a claim written through it would commit on its own.
  if (runner === undefined) {
    throw new StateError(
      "the TypeORM EntityManager has no query runner of its own: pass the transaction's (the one dataSource.transaction hands its callback)",
    );
  }
  return {
    async query<R extends object = Record<string, unknown>>(
      text: string,
      values: readonly unknown[] = [],
    ): Promise<SqlResult<R>> {
      // No check of runner.isTransactionActive: after a handler ended the transaction
      // through its query runner, the library's xid check (its last statement) must run
      // and raise, which is how the library learns of it (src/tx/layer-transaction.ts).
      try {
        const result = await runner.query(text, [...values], true);
        return { rows: result.records as R[], rowCount: result.affected ?? null };
      } catch (error) {
        // After the server ended the session: its FATAL, not "query runner released".
        throw ConnectionErrorWatch.of(runner)?.explain(error) ?? error;
      }
    },
  };
}
