/**
 * Charging an external payment API from a consumer handler, through the outbox. The
 * handler writes the order and enqueues the charge through `ctx.tx`, so both commit
 * with the claim: one charge row per order however often the order is delivered. A
 * relay then POSTs each charge with the row's id as its Idempotency-Key, so the API
 * applies it once even when the relay sends it twice (it died after the call and
 * before its mark). `examples/http-payments.ts` is such an API.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=… SQS_ENDPOINT=… PAYMENTS_URL=http://127.0.0.1:3000 \
 *     npx tsx examples/outbox.ts
 */
import { pathToFileURL } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { createConsumer, migrate, type HandlerContext } from 'effectively-once';
import { createRelay, enqueue, httpPublisher, migrateOutbox } from 'effectively-once/outbox';
import { sqsSource } from 'effectively-once/sqs';

/** The message body. */
export interface OrderPlaced {
  orderId: string;
  customerId: string;
  totalCents: number;
}

export async function createTables(pool: pg.Pool): Promise<void> {
  await migrate(pool);
  await migrateOutbox(pool);
  await pool.query(
    'CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, total_cents integer NOT NULL)',
  );
}

// #region handler
/** The order, and the charge to make at the payment API, in the claim's transaction. */
export async function placeOrder(order: OrderPlaced, { tx }: HandlerContext<OrderPlaced>) {
  await tx.query('INSERT INTO orders (id, total_cents) VALUES ($1, $2)', [
    order.orderId,
    order.totalCents,
  ]);
  // Commits with the claim or not at all. The customer's charges go out in order.
  await enqueue(tx, {
    destination: 'payments',
    orderingKey: order.customerId,
    payload: { customerId: order.customerId, amountCents: order.totalCents },
  });
}
// #endregion

// #region relay
/** The relay: each `payments` row becomes one POST /charges, keyed by the row's id. */
export function paymentsRelay(pool: pg.Pool, paymentsUrl: string) {
  const relay = createRelay({
    pool,
    publishers: {
      payments: httpPublisher({
        url: new URL('/charges', paymentsUrl),
        headers: { 'x-tenant': 'shop' },
      }),
    },
    maxAttempts: 8,
    retention: { olderThanMs: 7 * 86_400_000 },
  });
  relay.on('parked', ({ id, error }) => console.error(`charge ${id} parked:`, error));
  return relay;
}
// #endregion

/** Runs the consumer and the relay until `signal` aborts. */
export async function main({
  signal,
  env = process.env,
}: {
  signal: AbortSignal;
  env?: NodeJS.ProcessEnv;
}) {
  const pool = new pg.Pool({ connectionString: env.DATABASE_URL });
  await createTables(pool);
  const client = new SQSClient({
    region: env.AWS_REGION ?? 'us-east-1',
    endpoint: env.SQS_ENDPOINT,
  });
  const consumer = createConsumer<OrderPlaced>({
    name: 'orders',
    pool,
    source: sqsSource<OrderPlaced>({ client, queueUrl: env.QUEUE_URL ?? '' }),
    handler: placeOrder,
  });
  const relay = paymentsRelay(pool, env.PAYMENTS_URL ?? 'http://127.0.0.1:3000');
  await consumer.start();
  await relay.start();
  await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
  await consumer.stop();
  await relay.stop();
  client.destroy();
  await pool.end();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal });
}
