import { canConnect } from './ports.js';
import { isAlive, killProcess, spawnDetached, waitUntil } from './process.js';
import type { JavaServiceState } from './state.js';

/**
 * Starts (or restarts) a JVM service from its recorded command line and waits
 * until `ready` says so. `onSpawn` gets the pid as soon as it exists.
 */
export async function startJava(
  svc: JavaServiceState,
  what: string,
  ready: () => Promise<boolean>,
  onSpawn: (pid: number) => void = () => {},
  timeoutMs = 60_000,
): Promise<number> {
  if (svc.pid > 0 && isAlive(svc.pid))
    throw new Error(`${what} is already running (pid ${svc.pid})`);
  // A port still taken means another process grabbed it (or a stale service): fail clearly.
  if (await canConnect(svc.port)) throw new Error(`${what}: port ${svc.port} is already in use`);
  const pid = spawnDetached(svc.command, svc.args, svc.logFile);
  // Recorded before waiting: if the caller gives up (a test timeout), teardown still finds it.
  onSpawn(pid);
  await waitUntil(ready, {
    what: `${what} did not become ready`,
    timeoutMs,
    logFile: svc.logFile,
    pid,
  }).catch(async (error: unknown) => {
    await killProcess(pid, 'SIGKILL');
    throw error;
  });
  return pid;
}

/** SIGTERM is a clean shutdown; SIGKILL is a crash (what chaos tests want). */
export async function stopJava(
  svc: JavaServiceState,
  signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM',
): Promise<void> {
  await killProcess(svc.pid, signal, 30_000);
  // The JVM's main thread can be a zombie while other threads still hold the
  // listening socket; "stopped" means the port is closed, so wait for that.
  await waitUntil(async () => !(await canConnect(svc.port)), {
    what: `port ${svc.port} still open after stopping pid ${svc.pid}`,
    timeoutMs: 15_000,
    intervalMs: 50,
  });
}

/** Flags shared by the JVM services: small heap, quick start on a 2-core box. */
export function jvmFlags(maxHeap: string): string[] {
  return [
    `-Xmx${maxHeap}`,
    '-XX:+UseSerialGC',
    '-XX:TieredStopAtLevel=1',
    '-Djava.awt.headless=true',
  ];
}
