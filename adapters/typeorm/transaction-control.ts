import type { QueryRunner } from 'typeorm';
import { TransactionControlError } from '../../src/errors.js';
import { controlRefusal } from '../../src/tx/guard.js';

/** The query runner's methods that end (or leave) the transaction they run on. */
type Control =
  'commitTransaction' | 'rollbackTransaction' | 'startTransaction' | 'release' | 'query';

/**
 * While the handler runs, refuses the calls on the claim's query runner that would end
 * the claim's transaction under it: `commitTransaction()` / `rollbackTransaction()` at
 * the claim's level (depth 1) and `release()`. Let through, the first commits the claim
 * with half the effect (what follows runs in a transaction the library must roll back:
 * acked, the rest lost), the second lets every later statement autocommit outside the
 * claim (applied again on each redelivery). Refused, the handler's attempt fails and
 * nothing of it commits. Nested `tx.transaction(…)` (savepoints, depth 2 and more) and
 * `startTransaction()` inside the claim (a savepoint) pass. A raw statement that ends
 * the transaction (`tx.query('ROLLBACK')`, every `query` of the runner is checked as
 * the pg door checks its own) is refused before it is sent; TypeORM's own savepoint
 * statements pass, its START TRANSACTION was sent before the guard and its COMMIT or
 * ROLLBACK comes after the guard is lifted. Returns the function that
 * lifts the guard, which must run before TypeORM's own COMMIT or ROLLBACK and release.
 */
export function guardTransactionControl(runner: QueryRunner): () => void {
  // BaseQueryRunner's nesting level (protected in its types): 1 is the claim's own.
  const depth = () => (runner as unknown as { transactionDepth: number }).transactionDepth;
  const original = {
    commitTransaction: runner.commitTransaction.bind(runner),
    rollbackTransaction: runner.rollbackTransaction.bind(runner),
    startTransaction: runner.startTransaction.bind(runner),
    query: runner.query.bind(runner),
  };
  const refuse = (call: Control): Promise<never> =>
    Promise.reject(
      new TransactionControlError(
        `queryRunner.${call}() inside the handler would end the claim's transaction; ` +
          'return (or throw) instead, and nest with tx.transaction(…) for a savepoint',
        { call },
      ),
    );
  const guarded: Pick<QueryRunner, Control> = {
    commitTransaction: () => {
      if (depth() <= 1) return refuse('commitTransaction');
      return original.commitTransaction();
    },
    rollbackTransaction: () => {
      if (depth() <= 1) return refuse('rollbackTransaction');
      return original.rollbackTransaction();
    },
    startTransaction: (...args: Parameters<QueryRunner['startTransaction']>) => {
      // Depth 0 only after the claim's transaction ended some other way (raw COMMIT):
      // a new transaction there would be outside the claim.
      if (depth() < 1) return refuse('startTransaction');
      return original.startTransaction(...args);
    },
    release: () => refuse('release'),
    query: ((text: string, ...rest: unknown[]) => {
      const refusal = typeof text === 'string' ? controlRefusal(text) : undefined;
      if (refusal !== undefined) return Promise.reject(refusal);
      return Reflect.apply(original.query, runner, [text, ...rest]) as unknown;
    }) as QueryRunner['query'],
  };
  Object.assign(runner, guarded);
  return () => {
    // The methods live on the prototype: dropping the own ones restores them.
    for (const name of Object.keys(guarded) as Control[])
      delete (runner as Partial<Record<Control, unknown>>)[name];
  };
}
