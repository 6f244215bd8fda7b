/**
 * Effects outside the database (an email, an HTTP call, a charge at a payment provider)
 * through an outbox. The handler records the intent in `outbox` through `ctx.tx`, so it
 * commits with the claim: one row per order however often the order is delivered. A
 * relay sends each row later with the row's own idempotency key, so its retries are safe
 * at a provider that honours the key, and marks it sent.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=… SQS_ENDPOINT=… npx tsx examples/outbox.ts
 */
import { pathToFileURL } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import pg from 'pg';
import { createConsumer, type HandlerContext } from 'effectively-once';
import { sqsSource } from 'effectively-once/sqs';

/** The message body. */
export interface OrderPlaced {
  orderId: string;
  email: string;
  totalCents: number;
}

/** One unsent outbox row, as the relay hands it to `send`. */
export interface OutboxRow {
  id: string;
  idempotencyKey: string;
  kind: string;
  payload: unknown;
}

export async function createTables(pool: pg.Pool): Promise<void> {
  await pool.query(`
    CREATE TABLE IF NOT EXISTS orders (id text NOT NULL, total_cents integer NOT NULL);
    CREATE TABLE IF NOT EXISTS outbox (
      id              bigserial   PRIMARY KEY,
      idempotency_key text        NOT NULL UNIQUE,
      kind            text        NOT NULL,
      payload         jsonb       NOT NULL,
      sent_at         timestamptz
    )`);
}

// #region handler
/** The effect, and the intent to email a receipt, in the claim's transaction. */
export async function placeOrder(order: OrderPlaced, { tx, key }: HandlerContext<OrderPlaced>) {
  await tx.query('INSERT INTO orders (id, total_cents) VALUES ($1, $2)', [
    order.orderId,
    order.totalCents,
  ]);
  // Commits with the claim: one outbox row per order, however often it is delivered.
  await tx.query('INSERT INTO outbox (idempotency_key, kind, payload) VALUES ($1, $2, $3)', [
    `receipt-email:${key}`,
    'receipt-email',
    JSON.stringify(order),
  ]);
}
// #endregion

// #region relay
/**
 * Sends up to `limit` unsent rows and marks them sent; returns how many. Rows another
 * relay holds are skipped. A crash after `send` and before COMMIT sends the row again,
 * with the same idempotency key: the provider must deduplicate on it.
 */
export async function relayOutbox(
  pool: pg.Pool,
  send: (row: OutboxRow) => Promise<void>,
  limit = 10,
): Promise<number> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<OutboxRow>(
      `SELECT id, idempotency_key AS "idempotencyKey", kind, payload FROM outbox
        WHERE sent_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [limit],
    );
    for (const row of rows) {
      await send(row);
      await client.query('UPDATE outbox SET sent_at = now() WHERE id = $1', [row.id]);
    }
    await client.query('COMMIT');
    return rows.length;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
// #endregion

/** Runs the consumer and a relay (every second) until `signal` aborts. */
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
    source: sqsSource<OrderPlaced>({
      client,
      queueUrl: env.QUEUE_URL ?? '',
      keyAttribute: 'Idempotency-Key',
    }),
    handler: placeOrder,
  });
  await consumer.start();
  // Stands in for the email provider's API call, which takes `row.idempotencyKey`.
  const send = async (row: OutboxRow) => console.log(`send ${row.kind} (${row.idempotencyKey})`);
  while (!signal.aborted) {
    await relayOutbox(pool, send).catch((error: unknown) => console.error('relay:', error));
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  await consumer.stop();
  client.destroy();
  await pool.end();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  process.once('SIGTERM', () => stop.abort());
  await main({ signal: stop.signal });
}
