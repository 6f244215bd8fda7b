/**
 * A RabbitMQ worker: shipment requests arrive on a queue, each one inserts a shipment row
 * through `ctx.tx`. The dedup key is the message's `message-id`, so a message redelivered
 * after a lost connection or a crash is a duplicate, not a second shipment. A message is
 * acked only after its effect committed; a failing one waits in a delay queue and, after
 * five attempts, goes to the `shipments.dlx` exchange.
 *
 *   DATABASE_URL=postgres://… RABBITMQ_URL=amqp://localhost RABBITMQ_QUEUE=shipments \
 *   npx tsx examples/rabbitmq-worker.ts
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { createConsumer } from 'effectively-once';
import { rabbitmqSource } from 'effectively-once/rabbitmq';

/** The message body (JSON). */
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

  // #region consumer
  const consumer = createConsumer<ShipmentRequested>({
    name: 'shipments',
    pool,
    concurrency: 10,
    maxAttempts: 5,
    source: rabbitmqSource<ShipmentRequested>({
      url: required(env, 'RABBITMQ_URL'),
      queue: env.RABBITMQ_QUEUE ?? 'shipments', // declared beforehand (classic or quorum)
      prefetch: 10, // unacked messages at once: the source's concurrency bound
      deadLetterExchange: env.RABBITMQ_DLX ?? 'shipments.dlx',
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
  await consumer.stop({ timeoutMs: 30_000 }); // acks what committed, then closes the connection
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
