import { settlesBefore } from './deadline.js';
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
 * A tick waiting for a pool connection leaves the pool's queue on `stop()` (see
 * `pruneTable`), and `stop(deadline)` waits for a statement still running only until
 * the deadline: a prune is idempotent and batched, so abandoning one loses nothing.
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

  /** Stops ticking; resolves once the running tick ends, or at `deadline` at the latest. */
  async stop(deadline?: AbortSignal): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.abort.abort();
    const running = this.running;
    if (running === undefined) return;
    if (deadline === undefined) await running;
    else await settlesBefore(running, deadline);
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
