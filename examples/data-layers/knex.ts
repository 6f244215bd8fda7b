/**
 * Knex: an orders consumer, a charges endpoint and an outbox row, each written with Knex's
 * query builder inside Knex's own transaction (`ctx.tx` is a `Knex.Transaction`), where the
 * library claims the key, stores the answer and commits them together.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=… SQS_ENDPOINT=… PORT=3000 \
 *     npx tsx examples/data-layers/knex.ts
 */
import knex from 'knex';
import pg from 'pg';
import { createConsumer, type Source } from 'effectively-once';
import { createIdempotency } from 'effectively-once/http';
import { knexLayer } from 'effectively-once/knex';
import { enqueue } from 'effectively-once/outbox';
import {
  runDirectly,
  runExample,
  type ChargeRequest,
  type ExampleApp,
  type ExampleOptions,
  type OrderPlaced,
} from './run.js';

/** The orders consumer and the charges endpoint on Knex. */
export async function knexApp(
  databaseUrl: string,
  source: Source<OrderPlaced>,
): Promise<ExampleApp> {
  // #region layer
  const db = knex({ client: 'pg', connection: databaseUrl });
  const dataLayer = knexLayer(db);
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
      // tx is Knex's Transaction: the effect commits with the claim, or neither does.
      await tx('layer_effects').insert({
        id: `order-${order.orderId}`,
        door: 'consumer',
        amount: order.totalCents,
      });
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
    await tx('layer_effects').insert({ id: `charge-${key}`, door: 'http', amount: amountCents });
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
      await db.destroy();
      await pool.end();
    },
  };
}

/** Runs the consumer and the endpoint until `signal` aborts. */
export const main = (options: ExampleOptions): Promise<void> => runExample(knexApp, options);

await runDirectly(import.meta.url, main);
