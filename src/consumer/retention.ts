import type { Pool } from 'pg';
import { RetentionPruner } from '../retention.js';
import { prune } from '../store/prune.js';
import type { TableRef } from '../store/identifiers.js';
import type { ConsumerStats } from '../types.js';
import type { ConsumerEventHub } from './events.js';

/** One consumer's dedup window, reported as its `pruned` and `error` events. */
export function consumerRetention(
  pool: Pool,
  consumer: string,
  table: TableRef,
  options: { olderThanMs: number; intervalMs: number; batchSize: number; dutyCycle: number },
  hub: ConsumerEventHub,
  stats: ConsumerStats,
): RetentionPruner {
  return new RetentionPruner(
    options.intervalMs,
    (signal) =>
      prune(pool, {
        consumer,
        olderThan: options.olderThanMs,
        batchSize: options.batchSize,
        dutyCycle: options.dutyCycle,
        schema: table.schema,
        table: table.table,
        signal,
      }),
    {
      pruned: (deleted, durationMs) => {
        stats.pruned += deleted;
        hub.emit('pruned', { deleted, durationMs });
      },
      error: (error) => hub.emit('error', error),
    },
  );
}
