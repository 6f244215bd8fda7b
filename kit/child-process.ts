/**
 * A server script in a Node process of its own (with the tsx loader), followed through
 * the JSON lines it writes on stdout (kit/payments/child-protocol.ts's `emit`): `ready`
 * with its port, and whatever events the script reports. The payment server
 * (kit/payments/spawn.ts) and the steps server (kit/steps/spawn.ts) are started with it.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

/** One event line the child wrote: `t` names it, the rest is the script's. */
export interface ChildEvent {
  t: string;
  [field: string]: unknown;
}

/** A script running in a child process. */
export interface ChildProcess {
  /** Resolves with the port of its `ready` line; rejects if it exits first. */
  readonly ready: Promise<number>;
  /** Resolves with the exit code or the signal that ended it, once every line was read. */
  readonly exited: Promise<number | NodeJS.Signals>;
  /** The last 4000 characters it wrote on stderr (why it died, when it did on its own). */
  stderr(): string;
  /** Sends a signal if it is still running (SIGSTOP / SIGCONT for a stalled owner). */
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM (graceful) if still running; resolves when it is gone. */
  stop(): Promise<void>;
  /** SIGKILL at once, wherever it is; resolves when it is gone. */
  kill(): Promise<void>;
}

/** Options of {@link spawnChild}. */
export interface ChildOptions {
  /** The script's path. */
  entry: string;
  /** Environment added to this process's. */
  env: Record<string, string>;
  /** Names the child in the error of a start that failed. */
  label: string;
  /** Called with every event line, in order (the `ready` line included). */
  onEvent?: (event: ChildEvent) => void;
}

/** Starts `entry` in a new Node process with the same TypeScript loader (tsx). */
export function spawnChild(options: ChildOptions): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', options.entry], {
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
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
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      return; // not a protocol line (a library's own output)
    }
    if (typeof event !== 'object' || event === null) return;
    const { t, port } = event as { t?: unknown; port?: unknown };
    if (typeof t !== 'string') return;
    if (t === 'ready' && typeof port === 'number') markReady(port);
    options.onEvent?.(event as ChildEvent);
  });
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  const exited = new Promise<number | NodeJS.Signals>((resolve) => {
    // 'close' comes after stdout ended: every line has been read.
    child.once('close', (code, signal) => {
      failReady(
        new Error(`${options.label} exited before it was ready (${signal ?? code}):\n${stderr}`),
      );
      resolve(signal ?? code ?? -1);
    });
  });
  return {
    ready,
    exited,
    stderr: () => stderr,
    signal: (signal) => {
      if (running()) child.kill(signal);
    },
    stop: async () => {
      if (running()) child.kill('SIGTERM');
      await exited;
    },
    kill: async () => {
      if (running()) child.kill('SIGKILL');
      await exited;
    },
  };
}
