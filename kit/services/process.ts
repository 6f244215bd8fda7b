import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';

/** Run a service process as another user (Postgres refuses to run as root). */
export interface RunAs {
  uid: number;
  gid: number;
}

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  runAs?: RunAs | undefined;
  timeoutMs?: number;
}

/** A command line for error messages: a 10 kB classpath would bury the actual error. */
export function describeCommand(cmd: string, args: readonly string[]): string {
  return [
    cmd,
    ...args.map((a) => (a.length > 120 ? `${a.slice(0, 60)}...(${a.length} chars)` : a)),
  ].join(' ');
}

/** Runs a command to completion; the error carries its output, which is where tools explain themselves. */
export function run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      {
        cwd: opts.cwd,
        env: opts.env ?? process.env,
        timeout: opts.timeoutMs ?? 120_000,
        maxBuffer: 16 * 1024 * 1024,
        ...(opts.runAs ?? {}),
      },
      (error, stdout, stderr) => {
        if (error) {
          const output = `${stdout}\n${stderr}`.trim().split('\n').slice(-30).join('\n');
          const how = error.killed
            ? 'timed out'
            : `exit code ${String(error.code ?? error.signal)}`;
          reject(new Error(`${describeCommand(cmd, args)} failed (${how})\n${output}`));
        } else {
          resolve(stdout);
        }
      },
    );
  });
}

/**
 * Starts a long-running service detached, output appended to `logFile`.
 * Detached + unref because the process must outlive whoever started it: a
 * jest worker may restart a broker mid-test, and global teardown (another
 * process) stops it later by pid from the state file.
 */
export function spawnDetached(
  cmd: string,
  args: readonly string[],
  logFile: string,
  opts: RunOptions = {},
): number {
  const fd = fs.openSync(logFile, 'a');
  try {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      detached: true,
      stdio: ['ignore', fd, fd],
      ...(opts.runAs ?? {}),
    });
    // A failed spawn (ENOENT) also emits 'error', which would crash jest unhandled.
    child.on('error', () => {});
    if (child.pid === undefined)
      throw new Error(`could not spawn ${cmd} (not found or not executable?)`);
    child.unref();
    return child.pid;
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * A zombie counts as dead: an orphaned service is reparented to PID 1, which
 * in a container may never reap it, and kill(pid, 0) still succeeds then.
 */
export function isAlive(pid: number): boolean {
  if (pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no procfs (macOS): trust kill(0)
  }
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** Signals the process group (the JVM may have children) and escalates to SIGKILL after `graceMs`. */
export async function killProcess(
  pid: number,
  signal: NodeJS.Signals = 'SIGTERM',
  graceMs = 15_000,
): Promise<void> {
  const send = (sig: NodeJS.Signals): void => {
    try {
      process.kill(-pid, sig); // detached => own process group
    } catch {
      try {
        process.kill(pid, sig);
      } catch {
        /* already gone */
      }
    }
  };
  // pid 0 would mean "my own process group": never signal it.
  if (pid <= 0 || !isAlive(pid)) return;
  send(signal);
  const deadline = Date.now() + graceMs;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      send('SIGKILL');
      await sleep(200);
      return;
    }
    await sleep(100);
  }
}

/** Last lines of a log file, for error messages (a failed start is useless without them). */
export function tail(file: string, lines = 40): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export interface WaitOptions {
  /** What we wait for, for the error message. */
  what: string;
  timeoutMs: number;
  logFile?: string | undefined;
  /** Fail fast when this process dies instead of waiting for the timeout. */
  pid?: number | undefined;
  intervalMs?: number;
}

/** Polls `probe` until it returns true; throws with the log's tail on timeout or early exit. */
export async function waitUntil(probe: () => Promise<boolean>, opts: WaitOptions): Promise<void> {
  const deadline = Date.now() + opts.timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await probe()) return;
    } catch (error) {
      lastError = error;
    }
    const died = opts.pid !== undefined && !isAlive(opts.pid);
    if (died || Date.now() > deadline) {
      const why = died ? `process ${opts.pid} exited` : `timed out after ${opts.timeoutMs} ms`;
      const last = lastError instanceof Error ? `\nlast probe error: ${lastError.message}` : '';
      const log = opts.logFile
        ? `\n--- last lines of ${opts.logFile} ---\n${tail(opts.logFile)}`
        : '';
      throw new Error(`${opts.what}: ${why}${last}${log}`);
    }
    await sleep(opts.intervalMs ?? 200);
  }
}

/**
 * Last line of defence at teardown: SIGKILL every process whose command line
 * mentions `dir` (each service's config or data dir lives there). Catches a
 * service whose pid never reached the state file (a restart cut short, a
 * crashed jest). Linux only; elsewhere a no-op.
 */
export function killProcessesUsing(dir: string): number[] {
  if (!fs.existsSync('/proc')) return [];
  const killed: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir) && isAlive(pid)) {
        process.kill(pid, 'SIGKILL');
        killed.push(pid);
      }
    } catch {
      /* gone, or not ours to read */
    }
  }
  return killed;
}
