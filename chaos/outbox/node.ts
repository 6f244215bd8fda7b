/**
 * One process of the outbox chaos run (chaos/outbox/run.ts), by role:
 * - `a`: service A, a consumer of the input (Kafka topic or SQS queue) whose handler,
 *   in `ctx.tx`, enqueues an outbox row (ordering key = the account) and takes the
 *   account's next sequence number (services.ts);
 * - `relay`: `createRelay` for one of the two destination sets, publishing to the
 *   run's output (relay-node.ts);
 * - `b`: service B, a consumer of the output topic or FIFO queue with the default dedup
 *   key (the outbox id), or the HTTP receiver (receiver.ts); its `b_applied` ledger's
 *   serial id is B's apply order.
 * Started by the run's Fleet (config as JSON in CHAOS_WORKER); the parent SIGKILLs it
 * at random, SIGTERM stops it cleanly.
 */
import pg from 'pg';
import type { Consumer } from 'effectively-once';
import { serveFleet, type FleetChild } from '../consumer/fleet-child.js';
import { WORKER_ENV, type FromWorker } from '../consumer/protocol.js';
import { stderrLogger } from '../../kit/stderr-logger.js';
import { chaosConsumer, inputSource, outputSource } from './consumers.js';
import { startReceiver } from './receiver.js';
import { startRelay } from './relay-node.js';
import { serviceA, serviceB } from './services.js';
import type { Downstream, Operation, OutboxNodeConfig } from './shared.js';

const config = JSON.parse(process.env[WORKER_ENV] ?? 'null') as OutboxNodeConfig | null;
if (config === null) throw new Error(`${WORKER_ENV} is not set: started by chaos/outbox/run.ts`);
const cfg: OutboxNodeConfig = config;
const tag = `[${cfg.role} ${cfg.index} pid ${process.pid}]`;
const logger = stderrLogger(tag);
/** Relay: SIGKILL itself after its next publish (see relay-node.ts). */
let armed = false;

function send(message: FromWorker): void {
  process.send?.(message);
}

let fleet: FleetChild | undefined;

/** Starts this process's role; resolves with how to stop it. */
async function startRole(pool: pg.Pool): Promise<() => Promise<void>> {
  if (cfg.role === 'relay') return startRelay(cfg, pool, logger, () => armed);
  if (cfg.role === 'b' && cfg.output.kind === 'http') return startReceiver(cfg, pool);
  const c: Consumer =
    cfg.role === 'a'
      ? chaosConsumer<Operation>(pool, cfg, 'service-a', inputSource(cfg), logger, serviceA(cfg))
      : chaosConsumer<Downstream>(pool, cfg, 'service-b', outputSource(cfg), logger, serviceB(cfg));
  await c.start();
  void c.done.then(() => {
    if (!fleet?.stopping()) {
      console.error(tag, 'receive loop ended unexpectedly; exiting for a restart');
      process.exit(4);
    }
  });
  return () => c.stop({ timeoutMs: 10_000 });
}

async function main(): Promise<void> {
  const pool = new pg.Pool({
    connectionString: cfg.databaseUrl,
    max: 8,
    connectionTimeoutMillis: 5000,
  });
  pool.on('error', () => undefined); // Postgres restarts on purpose
  const stopOne = await startRole(pool);
  fleet = serveFleet(
    async () => {
      await stopOne();
      await pool.end().catch(() => undefined);
    },
    () => (armed = true),
  );
  send({ type: 'ready' });
}

main().catch((error: unknown) => {
  console.error(tag, 'failed:', error instanceof Error ? error.message : error);
  process.exit(3);
});
