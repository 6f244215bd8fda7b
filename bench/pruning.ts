import type pg from 'pg';

/**
 * The `retention` of pruning runs: a 7-day window over a history 1 to 30 days old, so
 * about 80 % of it is a backlog the pruner works through during the drain. The interval
 * only delays the first pass (one pass deletes until nothing is left); 100 ms, the
 * minimum, has it start with the consumer. batchSize and dutyCycle stay the library's defaults.
 */
export const PRUNE_WHILE_CONSUMING = { olderThanMs: 7 * 86_400_000, intervalMs: 100 };

/** One DELETE statement of the consumer's pruner: when it returned and how many rows it deleted. */
export interface PruneStatement {
  at: number;
  rows: number;
}

/**
 * Records the pruner's DELETEs on the pool the consumer is given. The consumer's
 * `pruned` event comes once per pruning run, and a run over this backlog outlasts the
 * drain, so the bench reads each statement's row count on its way back to count what
 * was deleted *during* the drain. Nothing else the consumer sends is a DELETE.
 */
export function recordPrunes(pool: pg.Pool): PruneStatement[] {
  const statements: PruneStatement[] = [];
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  const observed = (...args: unknown[]): unknown => {
    const result = query(...args);
    if (typeof args[0] === 'string' && /^\s*DELETE FROM/.test(args[0]) && isPromise(result)) {
      void result.then(
        (r) => statements.push({ at: performance.now(), rows: r.rowCount ?? 0 }),
        () => undefined,
      );
    }
    return result;
  };
  pool.query = observed as typeof pool.query;
  return statements;
}

function isPromise(value: unknown): value is Promise<pg.QueryResult> {
  return value instanceof Promise;
}
