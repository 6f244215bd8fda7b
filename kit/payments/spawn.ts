import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { Framework } from './payments.js';

/** The payment API running in a child process (child.ts). */
export interface PaymentProcess {
  /** Resolves with the port once it listens; rejects if it exits first. */
  readonly ready: Promise<number>;
  /** Keys committed so far, in order (read from its stdout). */
  readonly committed: readonly string[];
  /** Resolves with the exit code or the signal that ended it. */
  readonly exited: Promise<number | NodeJS.Signals>;
  /** The last 4000 characters it wrote on stderr (why it died, when it did on its own). */
  stderr(): string;
  /** SIGTERM (graceful) if still running; resolves when it is gone. */
  stop(): Promise<void>;
  /** SIGKILL at once, wherever it is (the chaos harness's random kill); resolves when it is gone. */
  kill(): Promise<void>;
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

/** Starts child.ts in a new Node process with the same TypeScript loader (tsx). */
export function spawnPaymentServer(options: PaymentProcessOptions): PaymentProcess {
  const entry = options.entry ?? fileURLToPath(new URL('./child.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env: {
      ...process.env,
      EO_HTTP_FRAMEWORK: options.framework,
      EO_HTTP_DATABASE_URL: options.databaseUrl,
      EO_HTTP_SCHEMA: options.schema,
      EO_HTTP_PORT: String(options.port ?? 0),
      EO_HTTP_KILL_AFTER_COMMITS: String(options.killAfterCommits ?? 0),
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const committed: string[] = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  let markReady: (port: number) => void = () => undefined;
  let failReady: (error: Error) => void = () => undefined;
  const ready = new Promise<number>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  ready.catch(() => undefined);
  createInterface({ input: child.stdout }).on('line', (line) => {
    let event: { t?: string; port?: number; key?: string };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      return;
    }
    if (event.t === 'ready' && typeof event.port === 'number') markReady(event.port);
    if (event.t === 'committed' && typeof event.key === 'string') committed.push(event.key);
  });
  const exited = new Promise<number | NodeJS.Signals>((resolve) => {
    // 'close' comes after stdout ended: every line has been read.
    child.once('close', (code, signal) => {
      failReady(
        new Error(`payment server exited before it was ready (${signal ?? code}):\n${stderr}`),
      );
      resolve(signal ?? code ?? -1);
    });
  });
  return {
    ready,
    committed,
    exited,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
