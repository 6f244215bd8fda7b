/** Starts the steps server (child.ts) in a child process and follows its stdout lines. */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { ChargePoint } from './charge.js';
import type { StepsFramework } from './server.js';

/** A steps server in its own process. */
export interface StepsProcess {
  /** Resolves with the port once it listens; rejects if it exits first. */
  readonly ready: Promise<number>;
  /** Boundaries reached so far (`point`), in order. */
  readonly reached: readonly string[];
  /** Resolves once `point` was reached. */
  reach(point: string): Promise<void>;
  readonly exited: Promise<number | NodeJS.Signals>;
  stderr(): string;
  /** Sends a signal (SIGSTOP / SIGCONT for a stalled owner). */
  signal(signal: NodeJS.Signals): void;
  /** SIGKILL if still running; resolves when it is gone. */
  kill(): Promise<void>;
}

/** Options of {@link spawnStepsServer}. */
export interface StepsProcessOptions {
  framework: StepsFramework;
  databaseUrl: string;
  schema: string;
  providerUrl: string;
  leaseMs?: number;
  killAt?: ChargePoint | 'before-answer';
  holdAt?: ChargePoint;
}

export function spawnStepsServer(options: StepsProcessOptions): StepsProcess {
  const entry = fileURLToPath(new URL('./child.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env: {
      ...process.env,
      EO_STEPS_FRAMEWORK: options.framework,
      EO_HTTP_DATABASE_URL: options.databaseUrl,
      EO_HTTP_SCHEMA: options.schema,
      EO_STEPS_PROVIDER_URL: options.providerUrl,
      EO_STEPS_LEASE_MS: String(options.leaseMs ?? 30_000),
      EO_STEPS_KILL_AT: options.killAt ?? '',
      EO_STEPS_HOLD_AT: options.holdAt ?? '',
      EO_HTTP_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const reached: string[] = [];
  const waiting: Array<{ point: string; done: () => void }> = [];
  let markReady: (port: number) => void = () => undefined;
  let failReady: (error: Error) => void = () => undefined;
  const ready = new Promise<number>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  ready.catch(() => undefined);
  createInterface({ input: child.stdout }).on('line', (line) => {
    let event: { t?: string; port?: number; point?: string };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      return;
    }
    if (event.t === 'ready' && typeof event.port === 'number') markReady(event.port);
    if (event.t === 'at' && typeof event.point === 'string') {
      reached.push(event.point);
      for (const w of waiting.filter((x) => x.point === event.point)) w.done();
    }
  });
  const exited = new Promise<number | NodeJS.Signals>((resolve) => {
    child.once('close', (code, signal) => {
      failReady(
        new Error(`steps server exited before it was ready (${signal ?? code}):\n${stderr}`),
      );
      resolve(signal ?? code ?? -1);
    });
  });
  return {
    ready,
    reached,
    reach: (point) =>
      reached.includes(point)
        ? Promise.resolve()
        : new Promise<void>((resolve) => waiting.push({ point, done: resolve })),
    exited,
    stderr: () => stderr,
    signal: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
