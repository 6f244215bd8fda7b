import { fileURLToPath } from 'node:url';
import { spawnChild, type ChildProcess } from '../child-process.js';
import type { Framework } from './payments.js';

/** The payment API running in a child process (child.ts). */
export interface PaymentProcess extends ChildProcess {
  /** Keys committed so far, in order (read from its stdout). */
  readonly committed: readonly string[];
  /**
   * The event lines of type `t` it wrote so far, each counted by its `n` (default 1):
   * what another entry script reports (the steps chaos server's completer).
   */
  tally(t: string): number;
}

export interface PaymentProcessOptions {
  framework: Framework;
  databaseUrl: string;
  schema: string;
  /** Default 0: a free port. Pass the dead one's to restart "the same server". */
  port?: number;
  /** SIGKILL itself right after the Nth COMMIT, before that response is written. */
  killAfterCommits?: number;
  /**
   * Another entry script speaking child.ts's stdout protocol and reading its env (the
   * chaos harness's server adds routes of its own). Default child.ts.
   */
  entry?: string;
  /** More environment for the child. */
  env?: Record<string, string>;
}

/** Starts child.ts (or `entry`) in a new Node process (kit/child-process.ts). */
export function spawnPaymentServer(options: PaymentProcessOptions): PaymentProcess {
  const committed: string[] = [];
  const tallies = new Map<string, number>();
  const child = spawnChild({
    entry: options.entry ?? fileURLToPath(new URL('./child.ts', import.meta.url)),
    label: 'payment server',
    env: {
      EO_HTTP_FRAMEWORK: options.framework,
      EO_HTTP_DATABASE_URL: options.databaseUrl,
      EO_HTTP_SCHEMA: options.schema,
      EO_HTTP_PORT: String(options.port ?? 0),
      EO_HTTP_KILL_AFTER_COMMITS: String(options.killAfterCommits ?? 0),
      ...options.env,
    },
    onEvent: (event) => {
      if (event.t === 'committed' && typeof event['key'] === 'string') committed.push(event['key']);
      const n = typeof event['n'] === 'number' ? event['n'] : 1;
      tallies.set(event.t, (tallies.get(event.t) ?? 0) + n);
    },
  });
  return { ...child, committed, tally: (t) => tallies.get(t) ?? 0 };
}
