import { DatabaseError, EffectivelyOnceError } from './errors.js';

/** What a periodic prune reports. */
export interface PruneReport {
  pruned(deleted: number, durationMs: number): void;
  error(error: EffectivelyOnceError): void;
}

/**
 * Background pruning of a window (a consumer's dedup keys, an HTTP endpoint's stored
 * responses). Runs are never concurrent; each `run` deletes in small batches so it
 * never competes with claims for long locks, and stops between batches on `stop()`.
 */
export class RetentionPruner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly abort = new AbortController();

  constructor(
    private readonly intervalMs: number,
    private readonly run: (signal: AbortSignal) => Promise<number>,
    private readonly report: PruneReport,
  ) {}

  start(): void {
    if (this.timer !== undefined || this.abort.signal.aborted) return;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
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
    this.running = this.run(this.abort.signal)
      .then((deleted) => {
        if (deleted > 0) this.report.pruned(deleted, performance.now() - started);
      })
      .catch((cause: unknown) => {
        this.report.error(
          cause instanceof EffectivelyOnceError ? cause : new DatabaseError('prune', cause),
        );
      })
      .finally(() => {
        this.running = undefined;
      });
  }
}
