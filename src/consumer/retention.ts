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
      // name wrote them), and those of unknown lifetime once past every retention known:
      // never a key another configuration still keeps.
      pruneTable(pool, dedupPruneTarget(table, consumer), {
        keepMs: options.olderThanMs,
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
