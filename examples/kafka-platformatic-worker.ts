/**
 * The Kafka worker of kafka-worker.ts over `@platformatic/kafka` instead of kafkajs
 * (Node >= 22.22): you create the consumer and the dead-letter producer,
 * `platformaticClients` puts them in the shape `kafkaSource` drives, and everything
 * else (keys, order, offsets, rebalances, dead letters) is the same source.
 *
 *   DATABASE_URL=postgres://… KAFKA_BROKERS=localhost:9092 KAFKA_TOPIC=shipments \
 *   npx tsx examples/kafka-platformatic-worker.ts
 */
import { pathToFileURL } from 'node:url';
import { Consumer, Producer } from '@platformatic/kafka';
import pg from 'pg';
import { createConsumer } from 'effectively-once';
import { kafkaSource } from 'effectively-once/kafka';
import { platformaticClients } from 'effectively-once/kafka/platformatic';
import type { ShipmentRequested, WorkerOptions } from './kafka-worker.js';

/** Runs the worker until `signal` aborts, then stops it cleanly. */
export async function main({ signal, env = process.env }: WorkerOptions): Promise<void> {
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS shipments (
      shipment_id text NOT NULL,
      order_id    text NOT NULL,
      carrier     text NOT NULL
    )`);
  const groupId = env.KAFKA_GROUP ?? 'shipments';
  const bootstrapBrokers = required(env, 'KAFKA_BROKERS').split(',');

  // #region consumer
  // Buffer (de)serializers, the default; autocommit off: the source commits what finished.
  const kafkaConsumer = new Consumer({
    groupId,
    clientId: 'shipments-worker',
    bootstrapBrokers,
    autocommit: false,
  });
  const deadLetters = new Producer({ clientId: 'shipments-dlq', bootstrapBrokers });

  const consumer = createConsumer<ShipmentRequested>({
    name: 'shipments',
    pool,
    concurrency: 10,
    source: kafkaSource<ShipmentRequested>({
      ...platformaticClients({ consumer: kafkaConsumer, producer: deadLetters }),
      groupId,
      topics: [env.KAFKA_TOPIC ?? 'shipments'],
      fromBeginning: true,
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
  consumer.on('error', (error) => console.error(`shipments worker: ${error.message}`));

  await consumer.start();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  // #region stop
  await consumer.stop({ timeoutMs: 30_000 }); // commits what finished and leaves the group
  await kafkaConsumer.close(); // the clients are yours to close
  await deadLetters.close();
  // #endregion
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
