import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { BrokerName } from '../../kit/services/private.js';
import { ensureServices, type ChaosServices } from '../../kit/services/private.js';
import { killChildren } from './children.js';

/** What one side of the comparison runs with: Postgres (and a broker), and a pool on it. */
export interface Services {
  databaseUrl: string;
  /** SQS endpoint or comma-separated Kafka brokers; '' without a broker. */
  brokerEndpoint: string;
  pool: pg.Pool;
}

export const say = (line: string): void => console.error(`[compare] ${line}`);

let current: { services: ChaosServices; pool: pg.Pool; stopping?: Promise<void> } | undefined;
let interrupted = false;
/** Services being started: SIGINT waits for them, to stop them. */
let pending: Promise<unknown> | undefined;

/**
 * Runs `fn` with Postgres and `broker` (kit/services/private.ts: the given endpoints, else
 * private ones), and stops what was started afterwards, however `fn` ends.
 */
export async function withServices<T>(
  broker: BrokerName | null,
  fn: (services: Services) => Promise<T>,
): Promise<T> {
  const starting = ensureServices(broker, say);
  pending = starting;
  const services = await starting;
  pending = undefined;
  const pool = new pg.Pool({ connectionString: services.databaseUrl, max: 4 });
  pool.on('error', () => undefined);
  current = { services, pool };
  if (interrupted) {
    await stopCurrent();
    throw new Error('interrupted');
  }
  try {
    return await fn({
      databaseUrl: services.databaseUrl,
      brokerEndpoint: services.brokerEndpoint,
      pool,
    });
  } finally {
    await stopCurrent();
  }
}

/** Stops the current services once, however many ask (the run's end and SIGINT may both). */
function stopCurrent(): Promise<void> {
  const running = current;
  if (running === undefined) return Promise.resolve();
  running.stopping ??= (async () => {
    await running.pool.end().catch(() => undefined);
    await running.services.stop();
    if (current === running) current = undefined;
  })();
  return running.stopping;
}

/**
 * Ctrl-C: kill the servers and workers, stop the services this run started, exit 130.
 * Without it a SIGINT to the runner left them running (issue 26's known leftover).
 */
export function stopOnSigint(): void {
  // `on`, not `once`: a Ctrl-C under npm reaches the runner twice (from the terminal and
  // relayed by tsx), and a second SIGINT with no listener would kill it mid-cleanup.
  process.on('SIGINT', () => {
    if (interrupted) return;
    interrupted = true;
    say('SIGINT: stopping the servers / workers and the services this run started');
    void (async () => {
      await killChildren();
      await pending?.catch(() => undefined);
      await stopCurrent();
    })()
      .catch((error: unknown) => say(`stopping after SIGINT: ${String(error)}`))
      .finally(() => process.exit(130));
  });
}

/** True once SIGINT came: the run's results are partial, not to be written. */
export function wasInterrupted(): boolean {
  return interrupted;
}

/** Writes the run's table (`out`.md) and raw figures (`out`.json). */
export function writeResults(out: string, markdown: string, json: object): void {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(`${out}.md`, markdown);
  fs.writeFileSync(`${out}.json`, `${JSON.stringify(json, null, 2)}\n`);
  say(`wrote ${out}.md and .json`);
}

/** The installed version of each package (effectively-once: this checkout's). */
export function packageVersions(names: string[]): Record<string, string> {
  const versions: Record<string, string> = {};
  for (const name of names) {
    const file = name === 'effectively-once' ? 'package.json' : `node_modules/${name}/package.json`;
    versions[name] = (JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string }).version;
  }
  return versions;
}

/** `--contenders` (default: all `known`), each checked against `known`. */
export function pickContenders<T extends string>(
  list: string | undefined,
  known: readonly T[],
): T[] {
  return (list ?? known.join(',')).split(',').map((name) => {
    const found = known.find((k) => k === name);
    if (found === undefined)
      throw new Error(`--contenders: unknown ${name} (known: ${known.join(', ')})`);
    return found;
  });
}

/** The Postgres server's version, for the table's header. */
export async function postgresVersion(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query<{ v: string }>("SELECT current_setting('server_version') AS v");
  return rows[0]?.v ?? '?';
}

export function positive(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer`);
  return n;
}
