import type { Pool } from 'pg';
import type { ConsumerEventHub } from './events.js';
import { DatabaseError, EffectivelyOnceError } from './errors.js';
import type { TableRef } from './store/identifiers.js';
import type { ConsumerStats } from './types.js';
import { prune } from './store/prune.js';

/**
 * Background pruning of one consumer's dedup window. Runs are never concurrent and
 * delete in small batches so they never compete with claims for long locks.
 */
export class RetentionPruner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly abort = new AbortController();

  constructor(
    private readonly pool: Pool,
    private readonly consumer: string,
    private readonly table: TableRef,
    private readonly options: {
      olderThanMs: number;
      intervalMs: number;
      batchSize: number;
      dutyCycle: number;
    },
    private readonly hub: ConsumerEventHub,
    private readonly stats: ConsumerStats,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.tick(), this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.abort.abort();
    await this.running;
  }

  private tick(): void {
    if (this.running !== undefined) return;
    const started = performance.now();
    this.running = prune(this.pool, {
      consumer: this.consumer,
      olderThan: this.options.olderThanMs,
      batchSize: this.options.batchSize,
      dutyCycle: this.options.dutyCycle,
      schema: this.table.schema,
      table: this.table.table,
      signal: this.abort.signal,
    })
      .then((deleted) => {
        if (deleted === 0) return;
        this.stats.pruned += deleted;
        this.hub.emit('pruned', { deleted, durationMs: performance.now() - started });
      })
      .catch((cause: unknown) => {
        this.hub.emit(
          'error',
          cause instanceof EffectivelyOnceError ? cause : new DatabaseError('prune', cause),
        );
      })
      .finally(() => {
        this.running = undefined;
      });
  }
}
