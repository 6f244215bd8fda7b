/**
 * A Kafka worker: shipment requests arrive on a topic, each one inserts a shipment row
 * through `ctx.tx`. The dedup key is the record's `idempotency-key` header (else
 * `topic/partition/offset/timestamp`), so a record redelivered after a crash, a rebalance or an
 * offset reset is a duplicate, not a second shipment. Offsets are committed only after
 * the effect committed, up to the highest contiguous finished offset per partition.
 *
 *   DATABASE_URL=postgres://… KAFKA_BROKERS=localhost:9092 KAFKA_TOPIC=shipments \
 *   npx tsx examples/kafka-worker.ts
 */
import { pathToFileURL } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { createConsumer } from 'effectively-once';
import { kafkaSource } from 'effectively-once/kafka';

/** The record value (JSON). */
export interface ShipmentRequested {
  shipmentId: string;
  orderId: string;
  carrier: string;
}

export interface WorkerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where the endpoints come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Runs the worker until `signal` aborts, then stops it cleanly. */
export async function main({ signal, env = process.env }: WorkerOptions): Promise<void> {
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS shipments (
      shipment_id text NOT NULL,
      order_id    text NOT NULL,
      carrier     text NOT NULL
    )`);
  const kafka = new Kafka({
    clientId: 'shipments-worker',
    brokers: required(env, 'KAFKA_BROKERS').split(','),
    logLevel: logLevel.WARN,
  });

  // #region consumer
  const consumer = createConsumer<ShipmentRequested>({
    name: 'shipments',
    pool,
    concurrency: 10,
    source: kafkaSource<ShipmentRequested>({
      kafka,
      groupId: env.KAFKA_GROUP ?? 'shipments',
      topics: [env.KAFKA_TOPIC ?? 'shipments'],
      fromBeginning: true,
      // Records of different Kafka keys in one partition may run in parallel; one key stays in order.
      keyConcurrency: 4,
    }),
    handler: async (shipment, { tx }) => {
      await tx.query('INSERT INTO shipments (shipment_id, order_id, carrier) VALUES ($1, $2, $3)', [
        shipment.shipmentId,
        shipment.orderId,
        shipment.carrier,
      ]);
    },
  });
  // #endregion
  consumer.on('duplicate', ({ key }) => console.log(`shipment ${key}: duplicate, skipped`));
  consumer.on('error', (error) => console.error(`shipments worker: ${error.message}`));

  await consumer.start();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await consumer.stop({ timeoutMs: 30_000 }); // also disconnects the consumer the source created
  await pool.end();
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal });
}
