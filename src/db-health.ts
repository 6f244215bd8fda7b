import type { Pool } from 'pg';
import { retryDelay } from './backoff.js';
import { sleep } from './sleep.js';
import type { Logger } from './types.js';

// SQLSTATE classes and codes that mean "the database is not there", as opposed to
// "this statement failed": connection exceptions (08), admin/crash shutdown (57P01-03).
const UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '53300']);
const UNAVAILABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** True when an error says the database is unreachable rather than a statement failing. */
export function isUnavailable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (
    typeof code === 'string' &&
    (UNAVAILABLE_CODES.has(code) || code.startsWith('08') || UNAVAILABLE_ERRNOS.has(code))
  ) {
    return true;
  }
  const message = error instanceof Error ? error.message : '';
  return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(
    message,
  );
}

/** Probes of a database that went away: from 250 ms, doubling up to 5 s, jittered. */
const PROBE_BACKOFF = { initialMs: 250, maxMs: 5000 };

/**
 * Tracks whether Postgres is reachable. While it is down the consumer stops taking
 * deliveries (so attempts are not burned against a dead database) and probes with
 * backoff until a `SELECT 1` succeeds.
 */
export class DatabaseHealth {
  private down = false;
  private probing: Promise<void> | undefined;
  private readonly waiters: Array<() => void> = [];

  constructor(
    private readonly pool: Pool,
    private readonly logger: Logger,
    private readonly signal: AbortSignal,
  ) {}

  get healthy(): boolean {
    return !this.down;
  }

  /** Reports an unavailable database; starts probing if not already. */
  markDown(cause: unknown): void {
    if (this.down) return;
    this.down = true;
    this.logger.warn({ err: cause }, 'effectively-once: database unavailable, pausing deliveries');
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
        await this.pool.query('SELECT 1');
        this.down = false;
        this.logger.info({}, 'effectively-once: database reachable again, resuming');
      } catch {
        // Still down: probe again after a longer (jittered) pause.
      }
    }
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }
}
