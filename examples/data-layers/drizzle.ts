/**
 * Drizzle (node-postgres driver): an orders consumer, a charges endpoint and an outbox row,
 * each written with Drizzle's query builder inside Drizzle's own transaction (`ctx.tx` is
 * the transaction `db.transaction(async (tx) => …)` hands over), where the library claims
 * the key, stores the answer and commits them together. Over postgres.js, make `db` with
 * `drizzle({ client: postgres(databaseUrl) })` from `drizzle-orm/postgres-js`: the rest is
 * the same.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=… SQS_ENDPOINT=… PORT=3000 \
 *     npx tsx examples/data-layers/drizzle.ts
 */
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgTable, text } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { createConsumer, type Source } from 'effectively-once';
import { drizzleLayer } from 'effectively-once/drizzle';
import { createIdempotency } from 'effectively-once/http';
import { enqueue } from 'effectively-once/outbox';
import {
  runDirectly,
  runExample,
  type ChargeRequest,
  type ExampleApp,
  type ExampleOptions,
  type OrderPlaced,
} from './run.js';

// #region schema
/** The effects table, as the app declares it for Drizzle. */
export const layerEffects = pgTable('layer_effects', {
  id: text('id').primaryKey(),
  door: text('door').notNull(),
  amount: integer('amount').notNull(),
});
// #endregion

/** The orders consumer and the charges endpoint on Drizzle. */
export async function drizzleApp(
  databaseUrl: string,
  source: Source<OrderPlaced>,
): Promise<ExampleApp> {
  // #region layer
  const db = drizzle({ client: new pg.Pool({ connectionString: databaseUrl }) });
  const dataLayer = drizzleLayer(db);
  // The library's own pool, beside the layer's: migrations, pruning, each COMMIT read
  // back by the claim's xid, and ending the backend of a handler that timed out.
  const pool = new pg.Pool({ connectionString: databaseUrl });
  // #endregion

  // #region consumer
  const consumer = createConsumer({
    name: 'orders',
    pool,
    dataLayer,
    source,
    handler: async (order, { tx }) => {
      // tx is Drizzle's transaction: the effect commits with the claim, or neither does.
      await tx
        .insert(layerEffects)
        .values({ id: `order-${order.orderId}`, door: 'consumer', amount: order.totalCents });
      // An outbox row in the same transaction, through the layer's SQL runner.
      await enqueue(dataLayer.sql(tx), {
        destination: 'receipts',
        payload: { orderId: order.orderId },
      });
    },
  });
  // #endregion

  // #region endpoint
  const idempotency = createIdempotency({ pool, dataLayer, scope: 'shop' });
  const charges = idempotency.handler(async (request, { tx, key }) => {
    const { amountCents } = (await request.json()) as ChargeRequest;
    await tx
      .insert(layerEffects)
      .values({ id: `charge-${key}`, door: 'http', amount: amountCents });
    // Stored in the same transaction, replayed to a retry with the same Idempotency-Key.
    return Response.json({ id: `charge-${key}` }, { status: 201 });
  });
  // #endregion

  return {
    pool,
    consumer,
    charges,
    close: async () => {
      await idempotency.close();
      await db.$client.end();
      await pool.end();
    },
  };
}

/** Runs the consumer and the endpoint until `signal` aborts. */
export const main = (options: ExampleOptions): Promise<void> => runExample(drizzleApp, options);

await runDirectly(import.meta.url, main);
