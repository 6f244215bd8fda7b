import type { Pool } from 'pg';
import { RetentionPruner } from '../retention.js';
import { dedupPruneTarget, pruneTable } from '../store/prune.js';
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
      // The consumer's keys whose own expiry passed (whichever configuration of this
      // name wrote them): never a key another configuration still keeps, nor one of
      // unknown lifetime (an earlier version's, whose retention may be longer).
      pruneTable(pool, dedupPruneTarget(table, consumer), {
        batchSize: options.batchSize,
        dutyCycle: options.dutyCycle,
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
