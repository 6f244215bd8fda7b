/** child.ts in its own Node process (tsx, as kit/payments/spawn.ts runs its servers). */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface NestChild {
  /** Resolves with the port once it listens; rejects if it exits first. */
  readonly ready: Promise<number>;
  /** Every line it printed so far. */
  readonly lines: readonly string[];
  /** Resolves with the exit code or the signal that ended it. */
  readonly exited: Promise<number | NodeJS.Signals>;
  /** Resolves at the first line starting with `prefix`. */
  line(prefix: string): Promise<string>;
  /** SIGTERM (Nest's shutdown hooks run) if still running; resolves with how it ended. */
  stop(): Promise<number | NodeJS.Signals>;
  stderr(): string;
}

export interface NestChildOptions {
  platform: 'express' | 'fastify';
  databaseUrl: string;
  schema: string;
  port?: number;
  queueUrl?: string;
  kill?: 'http' | 'consumer';
}

export function spawnNest(options: NestChildOptions): NestChild {
  const entry = fileURLToPath(new URL('./child.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    env: {
      ...process.env,
      EO_NEST_PLATFORM: options.platform,
      EO_NEST_DATABASE_URL: options.databaseUrl,
      EO_NEST_SCHEMA: options.schema,
      EO_NEST_PORT: String(options.port ?? 0),
      EO_NEST_QUEUE_URL: options.queueUrl ?? '',
      EO_NEST_KILL: options.kill ?? '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiters: { prefix: string; resolve: (line: string) => void }[] = [];
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<number | NodeJS.Signals>((resolve) =>
    child.once('close', (code, signal) => resolve(signal ?? code ?? 0)),
  );
  createInterface({ input: child.stdout }).on('line', (line) => {
    lines.push(line);
    for (const waiter of waiters.splice(0))
      if (line.startsWith(waiter.prefix)) waiter.resolve(line);
      else waiters.push(waiter);
  });
  const line = (prefix: string): Promise<string> => {
    const seen = lines.find((l) => l.startsWith(prefix));
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      waiters.push({ prefix, resolve });
      void exited.then(() => reject(new Error(`child exited before "${prefix}": ${stderr}`)));
    });
  };
  const ready = line('listening ').then((l) => Number(l.split(' ')[1]));
  ready.catch(() => undefined);
  return {
    ready,
    lines,
    exited,
    line,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}
