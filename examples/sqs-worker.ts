/**
 * An SQS worker: orders arrive on a standard queue, each one inserts an order row and
 * credits the customer's lifetime total. Both writes go through `ctx.tx`, so an order
 * is booked once however often SQS or the producer repeats it.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=http://localhost:4566/000000000000/orders \
 *   SQS_ENDPOINT=http://localhost:4566 AWS_REGION=us-east-1 npx tsx examples/sqs-worker.ts
 *
 * Without SQS_ENDPOINT the client talks to AWS with the usual credential chain.
 */
import { pathToFileURL } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { createConsumer } from 'effectively-once';
import { sqsSource } from 'effectively-once/sqs';

/** The message body: one order, keyed by the producer's `Idempotency-Key` attribute. */
export interface OrderPlaced {
  orderId: string;
  customerId: string;
  totalCents: number;
}

export interface WorkerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where the endpoints come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Runs the worker until `signal` aborts, then stops it cleanly (in-flight orders finish). */
export async function main({ signal, env = process.env }: WorkerOptions): Promise<void> {
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  const client = new SQSClient({
    region: env.AWS_REGION ?? 'us-east-1',
    // Local emulators (LocalStack, ElasticMQ) accept any credentials.
    ...(env.SQS_ENDPOINT
      ? {
          endpoint: env.SQS_ENDPOINT,
          credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
        }
      : {}),
  });
  await pool.query(`
    CREATE TABLE IF NOT EXISTS orders (
      order_id    text    NOT NULL,
      customer_id text    NOT NULL,
      total_cents integer NOT NULL
    );
    CREATE TABLE IF NOT EXISTS customers (
      id             text   PRIMARY KEY,
      lifetime_cents bigint NOT NULL DEFAULT 0
    )`);

  // #region consumer
  const consumer = createConsumer<OrderPlaced>({
    name: 'orders',
    pool,
    concurrency: 10,
    maxAttempts: 5,
    source: sqsSource<OrderPlaced>({
      client,
      queueUrl: required(env, 'QUEUE_URL'),
      key: 'Idempotency-Key',
      waitTimeSeconds: 20,
    }),
    handler: async (order, { tx }) => {
      await tx.query(
        'INSERT INTO orders (order_id, customer_id, total_cents) VALUES ($1, $2, $3)',
        [order.orderId, order.customerId, order.totalCents],
      );
      await tx.query(
        `INSERT INTO customers (id, lifetime_cents) VALUES ($1, $2)
         ON CONFLICT (id) DO UPDATE SET lifetime_cents = customers.lifetime_cents + EXCLUDED.lifetime_cents`,
        [order.customerId, order.totalCents],
      );
    },
  });
  // #endregion
  // #region lifecycle
  consumer.on('duplicate', ({ key }) => console.log(`order ${key}: already booked, skipped`));
  consumer.on('dead-lettered', ({ key, error }) =>
    console.error(`order ${key ?? '?'}: dead-lettered: ${error.message}`),
  );
  consumer.on('error', (error) => console.error(`worker error: ${error.message}`));

  await consumer.start();
  await aborted(signal);
  await consumer.stop({ timeoutMs: 30_000 });
  // #endregion
  client.destroy();
  await pool.end();
}

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal });
}
