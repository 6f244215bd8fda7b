/**
 * A handler written with Kysely. `ctx.tx` is a pg client inside the open transaction
 * that holds the claim; Kysely wants a pool, so `kyselyOn(tx)` gives it a pool of
 * exactly that one connection. Queries built with it run in the claim's transaction:
 * do not call `db.transaction()` (the transaction is already open) and never COMMIT.
 * The same adapter works for any query builder that accepts a pool-like object.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=http://localhost:4566/000000000000/reservations \
 *   SQS_ENDPOINT=http://localhost:4566 npx tsx examples/kysely-handler.ts
 */
import { pathToFileURL } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Kysely, PostgresDialect, sql, type Generated, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import type { PoolClient } from 'pg';
import { createConsumer, type HandlerContext } from 'effectively-once';
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
/** A Kysely instance whose every query runs on `tx`, the claim's open transaction. */
export function kyselyOn<DB>(tx: PoolClient): Kysely<DB> {
  const connection = {
    query: (sqlText: string, parameters: ReadonlyArray<unknown>) =>
      tx.query(sqlText, [...parameters]),
    release: () => undefined, // the runner owns the connection and releases it after COMMIT
  } as unknown as PostgresPoolClient;
  return new Kysely<DB>({
    dialect: new PostgresDialect({
      pool: { connect: async () => connection, end: async () => undefined },
    }),
  });
}

/** The effect: reserve the stock and record the reservation, atomically with the claim. */
export async function reserve(
  message: ReserveStock,
  { tx }: HandlerContext<ReserveStock>,
): Promise<void> {
  const db = kyselyOn<Database>(tx);
  const updated = await db
    .updateTable('stock')
    .set({ available: sql<number>`available - ${message.quantity}` })
    .where('sku', '=', message.sku)
    .where('available', '>=', message.quantity)
    .executeTakeFirst();
  // Throwing rolls back the claim too: the message is retried, then dead-lettered.
  if (updated.numUpdatedRows === 0n) throw new Error(`not enough ${message.sku} in stock`);
  await db
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
  const consumer = createConsumer<ReserveStock>({
    name: 'reservations',
    pool,
    source: sqsSource<ReserveStock>({
      client,
      queueUrl: required(env, 'QUEUE_URL'),
      key: 'Idempotency-Key',
    }),
    handler: reserve,
  });
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
