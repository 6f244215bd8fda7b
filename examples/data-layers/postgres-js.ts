/**
 * postgres.js: an orders consumer, a charges endpoint and an outbox row, each written with
 * tagged templates inside postgres.js's own transaction (`ctx.tx` is the `sql`
 * `sql.begin(async (sql) => …)` hands over), where the library claims the key, stores the
 * answer and commits them together.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=… SQS_ENDPOINT=… PORT=3000 \
 *     npx tsx examples/data-layers/postgres-js.ts
 */
import pg from 'pg';
import postgres from 'postgres';
import { createConsumer, type Source } from 'effectively-once';
import { createIdempotency } from 'effectively-once/http';
import { enqueue } from 'effectively-once/outbox';
import { postgresLayer } from 'effectively-once/postgres-js';
import {
  runDirectly,
  runExample,
  type ChargeRequest,
  type ExampleApp,
  type ExampleOptions,
  type OrderPlaced,
} from './run.js';

/** The orders consumer and the charges endpoint on postgres.js. */
export async function postgresJsApp(
  databaseUrl: string,
  source: Source<OrderPlaced>,
): Promise<ExampleApp> {
  // #region layer
  const sql = postgres(databaseUrl);
  const dataLayer = postgresLayer(sql);
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
      // tx is the transaction's sql: the effect commits with the claim, or neither does.
      const effect = { id: `order-${order.orderId}`, door: 'consumer', amount: order.totalCents };
      await tx`INSERT INTO layer_effects ${tx(effect)}`;
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
    const effect = { id: `charge-${key}`, door: 'http', amount: amountCents };
    await tx`INSERT INTO layer_effects ${tx(effect)}`;
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
      await sql.end({ timeout: 5 });
      await pool.end();
    },
  };
}

/** Runs the consumer and the endpoint until `signal` aborts. */
export const main = (options: ExampleOptions): Promise<void> => runExample(postgresJsApp, options);

await runDirectly(import.meta.url, main);
