import pg from 'pg';
import { quoteIdentifier } from '../src/store/identifiers.js';
import type { Replication } from './services/cluster/node.js';
import { ensureServices, type BrokerName, type ChaosServices } from './services/private.js';

/**
 * What every chaos run holds for its lifetime: an abort signal for its loops, the
 * cleanups of what it started (run in reverse), and SIGINT/SIGTERM handling that stops
 * everything and exits 130. One owner, so the three targets stop alike.
 */
export interface RunScope {
  readonly abort: AbortController;
  /** Register the stop of something just started; run last-in, first-out. */
  defer(fn: () => Promise<void>): void;
  /** Aborts, removes the signal handlers and runs the cleanups. */
  close(): Promise<void>;
}

export function openRunScope(say: (line: string) => void, what: string): RunScope {
  const abort = new AbortController();
  const cleanups: Array<() => Promise<void>> = [];
  const cleanup = async (): Promise<void> => {
    for (const fn of cleanups.splice(0).reverse())
      await fn().catch((e: unknown) => say(`cleanup: ${String(e)}`));
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    say(`${signal}: stopping ${what}`);
    abort.abort();
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return {
    abort,
    defer: (fn) => void cleanups.push(fn),
    close: async () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      abort.abort();
      await cleanup();
    },
  };
}

/** A pool for the harness's own queries; Postgres restarts on purpose, so idle errors are expected. */
export function adminPool(databaseUrl: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: 3,
    connectionTimeoutMillis: 5000,
  });
  pool.on('error', () => undefined);
  return pool;
}

export async function dropChaosSchema(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`);
}

/**
 * A run's services (a failover cluster for Postgres with `failovers` > 0) and an admin
 * pool on them, stopped and ended when `scope` closes.
 */
export async function openRunServices(
  scope: RunScope,
  say: (line: string) => void,
  broker: BrokerName | null,
  failover: { failovers: number; replication: Replication },
): Promise<{ services: ChaosServices; pool: pg.Pool }> {
  const services = await ensureServices(
    broker,
    say,
    failover.failovers > 0 ? { replication: failover.replication } : undefined,
  );
  scope.defer(() => services.stop());
  if (services.root) say(`private services in ${services.root}`);
  const pool = adminPool(services.databaseUrl);
  scope.defer(() => pool.end());
  return { services, pool };
}

/** When `scope` closes: drops `schema` if the run `passed()` and is not to be kept, else says it is kept. */
export function dropSchemaAtClose(
  scope: RunScope,
  say: (line: string) => void,
  pool: pg.Pool,
  schema: string,
  drop: () => boolean,
): void {
  scope.defer(async () => {
    if (drop()) await dropChaosSchema(pool, schema);
    else say(`kept schema ${schema}`);
  });
}
