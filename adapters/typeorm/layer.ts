import type { DataSource, EntityManager } from 'typeorm';
import type { DataLayer, LayerTransactionSettings } from '../../src/data-layer.js';
import { ConfigurationError } from '../../src/errors.js';
import { ConnectionErrorWatch } from './connection-error.js';
import { typeormServerError } from './server-error.js';
import { transactionSql } from './sql-runner.js';
import { guardTransactionControl } from './transaction-control.js';

/**
 * The claim's transaction as a TypeORM transaction: `ctx.tx` is the `EntityManager`
 * `dataSource.transaction` hands its callback, so the handler writes its effect with
 * `tx.getRepository(…)`, `tx.save(…)`, `tx.createQueryBuilder(…)` as TypeORM's docs
 * show, and the library's claim, stored answer and outbox rows run on the same query
 * runner, in the same transaction.
 *
 * How TypeORM 1.x runs it (EntityManager.transaction over PostgresQueryRunner):
 * `START TRANSACTION` (then `SET TRANSACTION ISOLATION LEVEL` when the DataSource sets
 * `isolationLevel`; the library's own isolation statement comes after it and wins),
 * the callback, then `COMMIT`; when the callback or COMMIT fails, `ROLLBACK` (its own
 * failure swallowed) and the first error is rethrown; the query runner is released
 * either way. It never retries. A `tx.transaction(…)` inside the handler is a savepoint
 * of the claim's transaction (`SAVEPOINT typeorm_1`), not a transaction of its own.
 *
 * When the server ends the session while it idles in the transaction, TypeORM releases
 * the query runner and the COMMIT fails with "Query runner already released": the
 * transaction rejects with the connection's error instead (the server's FATAL, e.g.
 * 25P03 or 57P01), so the library sees what the server said.
 *
 * TypeORM sets no time limit on a transaction and takes no per-transaction pool wait:
 * the door's limits (`settings`) are enforced by the library (cancellation by the
 * backend's pid); the pool's wait is the DataSource's `connectTimeoutMS`.
 *
 * @param dataSource - an initialized DataSource of `type: 'postgres'` (the pg driver).
 */
export function typeormLayer(dataSource: DataSource): DataLayer<EntityManager> {
  if (dataSource.options.type !== 'postgres') {
    throw new ConfigurationError(
      'dataLayer',
      `typeormLayer needs a DataSource of type "postgres" (this one is "${dataSource.options.type}")`,
    );
  }
  return {
    name: 'typeorm',
    async transaction<T>(
      _settings: LayerTransactionSettings,
      body: (tx: EntityManager) => Promise<T>,
    ): Promise<T> {
      const connection = new ConnectionErrorWatch();
      try {
        return await dataSource.transaction(async (manager) => {
          await connection.watch(manager);
          // Present: dataSource.transaction runs its callback on a query runner of its own.
          const lift = guardTransactionControl(manager.queryRunner!);
          try {
            return await body(manager);
          } finally {
            lift();
          }
        });
      } catch (error) {
        throw connection.explain(error);
      } finally {
        connection.close();
      }
    },
    sql: transactionSql,
    serverError: typeormServerError,
  };
}
