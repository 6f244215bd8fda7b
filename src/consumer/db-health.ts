import type { Pool } from 'pg';
import { retryDelay } from '../backoff.js';
import { sleep } from '../sleep.js';
import { acquireClient } from '../tx/acquire.js';
import type { Logger } from '../types.js';

/** Probes of a database that went away: from 250 ms, doubling up to 5 s, jittered. */
const PROBE_BACKOFF = { initialMs: 250, maxMs: 5000 };
/** A probe that gets no pool connection this long fails (the next one tries again). */
const PROBE_ACQUIRE_MS = 5000;

/**
 * Tracks whether Postgres is reachable and takes writes. While it is not, the consumer
 * stops taking deliveries (so attempts are not burned against a dead or read-only
 * database) and probes with backoff until a connection says it can write.
 */
export class DatabaseHealth {
  private down = false;
  private probing: Promise<void> | undefined;
  private readonly waiters: Array<() => void> = [];

  constructor(
    private readonly pool: Pool,
    private readonly logger: Logger,
    private readonly signal: AbortSignal,
    /** The database's name in log lines (a routed consumer has several). */
    private readonly database?: string,
  ) {}

  get healthy(): boolean {
    return !this.down;
  }

  /** Reports an unavailable database; starts probing if not already. */
  markDown(cause: unknown): void {
    if (this.down) return;
    this.down = true;
    this.logger.warn(
      { err: cause, ...(this.database !== undefined ? { database: this.database } : {}) },
      this.database === undefined
        ? 'effectively-once: database unavailable, pausing deliveries'
        : 'effectively-once: database unavailable, its keys retry until it is back',
    );
    this.probing = this.probe();
  }

  /** Resolves when the database is reachable again (or the consumer stops). */
  async whenHealthy(): Promise<void> {
    if (!this.down || this.signal.aborted) return;
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  async close(): Promise<void> {
    this.wake();
    await this.probing;
  }

  private async probe(): Promise<void> {
    for (let failures = 1; this.down && !this.signal.aborted; failures++) {
      await sleep(retryDelay(failures, PROBE_BACKOFF), this.signal);
      try {
        await this.writable();
        this.down = false;
        this.logger.info(
          this.database !== undefined ? { database: this.database } : {},
          'effectively-once: database reachable again, resuming',
        );
      } catch {
        // Still down: probe again after a longer (jittered) pause.
      }
    }
    this.wake();
  }

  /**
   * Throws unless a pool connection reaches a server that takes writes. A read-only one
   * (a standby, a demoted primary) is dropped, not returned to the pool: the next probe
   * connects afresh, and lands wherever DNS or the pooler points by then.
   */
  private async writable(): Promise<void> {
    // Bounded and abortable: a probe queued on a pool held elsewhere must not hold stop().
    const client = await acquireClient(this.pool, PROBE_ACQUIRE_MS, this.signal);
    let failure: Error | undefined;
    try {
      const { rows } = await client.query<{ transaction_read_only?: string }>(
        'SHOW transaction_read_only',
      );
      if (rows[0]?.transaction_read_only !== 'off')
        failure = new Error('the database takes no writes (transaction_read_only is on)');
    } catch (error) {
      failure = error instanceof Error ? error : new Error(String(error));
    } finally {
      client.release(failure);
    }
    if (failure !== undefined) throw failure;
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}

/**
 * The health of a routed consumer's databases, as the receive loop sees it: deliveries
 * pause only while every database is down. One database down does not stop the others'
 * keys; its own keys fail as infrastructure (no attempt spent) and are retried.
 */
export class AnyHealthy {
  constructor(private readonly each: readonly DatabaseHealth[]) {}

  get healthy(): boolean {
    return this.each.some((h) => h.healthy);
  }

  async whenHealthy(): Promise<void> {
    if (this.healthy) return;
    await Promise.race(this.each.map((h) => h.whenHealthy()));
  }

  async close(): Promise<void> {
    await Promise.all(this.each.map((h) => h.close()));
  }
}
