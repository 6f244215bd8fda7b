import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** What the parent learns from a worker process. */
export interface ChildCounters {
  deliveries: number;
  processed: number;
  duplicates: number;
  failed: number;
}

/** A payment worker running in its own process (see crash-worker.ts). */
export interface ChildWorker {
  readonly name: string;
  readonly counters: ChildCounters;
  /** Whether it killed itself between COMMIT and ack. */
  readonly crashed: boolean;
  /** Resolves once the worker's consumer has started. */
  readonly ready: Promise<void>;
  /** Resolves with the key it was killed after, or undefined if it exited normally. */
  readonly exited: Promise<string | undefined>;
  /** Graceful stop (SIGTERM) if it is still running. */
  stop(): Promise<void>;
}

export interface ChildOptions {
  name: string;
  env: Record<string, string>;
  crashAfter: number;
  concurrency: number;
  /** Called when the process kills itself between COMMIT and delete. */
  onCrash?: (key: string, commits: number) => void;
  /** Called on every counter change. */
  onChange?: () => void;
}

/** Starts crash-worker.ts in a new Node process with the same TypeScript loader (tsx). */
export function spawnWorker(options: ChildOptions): ChildWorker {
  const entry = fileURLToPath(new URL('./crash-worker.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), entry], {
    env: {
      ...process.env,
      ...options.env,
      DEMO_WORKER: options.name,
      DEMO_CRASH_AFTER: String(options.crashAfter),
      DEMO_CONCURRENCY: String(options.concurrency),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const counters: ChildCounters = { deliveries: 0, processed: 0, duplicates: 0, failed: 0 };
  let crashedAfter: string | undefined;
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  let markReady: () => void = () => undefined;
  let failReady: (error: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    markReady = resolve;
    failReady = reject;
  });
  ready.catch(() => undefined); // awaited by the caller; a stop before ready is not an error here
  const lines = createInterface({ input: child.stdout });
  lines.on('line', (line) => {
    let event: { t?: string; key?: string; commits?: number };
    try {
      event = JSON.parse(line) as typeof event;
    } catch {
      return;
    }
    if (event.t === 'ready') markReady();
    else if (event.t === 'delivery') counters.deliveries += 1;
    else if (event.t === 'processed') counters.processed += 1;
    else if (event.t === 'duplicate') counters.duplicates += 1;
    else if (event.t === 'failed') counters.failed += 1;
    else if (event.t === 'crash') {
      crashedAfter = event.key;
      options.onCrash?.(event.key ?? '?', event.commits ?? 0);
    }
    options.onChange?.();
  });
  const exited = new Promise<string | undefined>((resolve) => {
    // 'close' comes after the child's stdout ended, so every line has been read.
    child.once('close', (code, signal) => {
      failReady(
        new Error(
          `worker ${options.name} exited before it was ready (${signal ?? code}):\n${stderr}`,
        ),
      );
      resolve(crashedAfter);
    });
  });
  return {
    name: options.name,
    counters,
    get crashed() {
      return crashedAfter !== undefined;
    },
    ready,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}
