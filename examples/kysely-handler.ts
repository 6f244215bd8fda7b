/**
 * A handler written with Kysely. `kyselyLayer(app)` (`effectively-once/kysely`) makes the
 * claim's transaction Kysely's own `app.transaction().execute(…)`: `ctx.tx` is that
 * `Transaction<Database>`, and the effect is written with Kysely's query builder in the
 * transaction that holds the claim. Do not call `ctx.tx.transaction()` (Kysely refuses a
 * nested one) and never COMMIT: Kysely commits once the library checked the claim.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=http://localhost:4566/000000000000/reservations \
 *   SQS_ENDPOINT=http://localhost:4566 npx tsx examples/kysely-handler.ts
 */
import { pathToFileURL } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Kysely, PostgresDialect, sql, type Generated, type Transaction } from 'kysely';
import pg from 'pg';
import { createConsumer, type Consumer, type HandlerContext, type Source } from 'effectively-once';
import { kyselyLayer } from 'effectively-once/kysely';
import { sqsSource } from 'effectively-once/sqs';

/** The tables, as Kysely sees them. */
export interface Database {
  stock: { sku: string; available: number };
  reservations: { id: Generated<number>; reservation_id: string; sku: string; quantity: number };
}

/** The message body. */
export interface ReserveStock {
  reservationId: string;
  sku: string;
  quantity: number;
}

// #region kysely
/** The consumer: its claim transaction is Kysely's, the handler's `ctx.tx` a Kysely `Transaction`. */
export function reservations(
  pool: pg.Pool,
  app: Kysely<Database>,
  source: Source<ReserveStock>,
): Consumer {
  return createConsumer<ReserveStock, Transaction<Database>>({
    name: 'reservations',
    pool, // the library's own: migrations, pruning, the cancel and the COMMIT check
    dataLayer: kyselyLayer(app),
    source,
    handler: reserve,
  });
}

/** The effect: reserve the stock and record the reservation, atomically with the claim. */
export async function reserve(
  message: ReserveStock,
  { tx }: HandlerContext<ReserveStock, Transaction<Database>>,
): Promise<void> {
  const updated = await tx
    .updateTable('stock')
    .set({ available: sql<number>`available - ${message.quantity}` })
    .where('sku', '=', message.sku)
    .where('available', '>=', message.quantity)
    .executeTakeFirst();
  // Throwing rolls back the claim too: the message is retried, then dead-lettered.
  if (updated.numUpdatedRows === 0n) throw new Error(`not enough ${message.sku} in stock`);
  await tx
    .insertInto('reservations')
    .values({ reservation_id: message.reservationId, sku: message.sku, quantity: message.quantity })
    .execute();
}
// #endregion

export interface WorkerOptions {
  /** Stop when this aborts. Run directly, SIGINT and SIGTERM abort it. */
  signal: AbortSignal;
  /** Where the endpoints come from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
}

/** Runs the reservation worker until `signal` aborts. */
export async function main({ signal, env = process.env }: WorkerOptions): Promise<void> {
  const pool = new pg.Pool({ connectionString: required(env, 'DATABASE_URL') });
  // Kysely listens for no error on a checked-out client: a connection lost mid-handler
  // would otherwise be an unhandled 'error' event.
  pool.on('connect', (client) =>
    client.on('error', (error) => console.error(`reservations: ${error.message}`)),
  );
  const app = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  await app.schema
    .createTable('stock')
    .ifNotExists()
    .addColumn('sku', 'text', (c) => c.primaryKey())
    .addColumn('available', 'integer', (c) => c.notNull())
    .execute();
  await app.schema
    .createTable('reservations')
    .ifNotExists()
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('reservation_id', 'text', (c) => c.notNull())
    .addColumn('sku', 'text', (c) => c.notNull())
    .addColumn('quantity', 'integer', (c) => c.notNull())
    .execute();
  const client = new SQSClient({
    region: env.AWS_REGION ?? 'us-east-1',
    ...(env.SQS_ENDPOINT
      ? {
          endpoint: env.SQS_ENDPOINT,
          credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
        }
      : {}),
  });
  const consumer = reservations(
    pool,
    app,
    sqsSource<ReserveStock>({
      client,
      queueUrl: required(env, 'QUEUE_URL'),
      key: 'Idempotency-Key',
    }),
  );
  consumer.on('error', (error) => console.error(`reservations: ${error.message}`));
  await consumer.start();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  await consumer.stop({ timeoutMs: 30_000 });
  client.destroy();
  await app.destroy(); // ends the pool
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
