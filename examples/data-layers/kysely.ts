/**
 * Kysely: an orders consumer, a charges endpoint and an outbox row, each written with
 * Kysely's query builder inside Kysely's own transaction (`ctx.tx` is the `Transaction`
 * `db.transaction().execute(async (trx) => …)` hands over), where the library claims the
 * key, stores the answer and commits them together.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=… SQS_ENDPOINT=… PORT=3000 \
 *     npx tsx examples/data-layers/kysely.ts
 */
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { createConsumer, type Source } from 'effectively-once';
import { createIdempotency } from 'effectively-once/http';
import { kyselyLayer } from 'effectively-once/kysely';
import { enqueue } from 'effectively-once/outbox';
import {
  runDirectly,
  runExample,
  type ChargeRequest,
  type ExampleApp,
  type ExampleOptions,
  type OrderPlaced,
} from './run.js';

/** The tables, as Kysely sees them. */
export interface Database {
  layer_effects: { id: string; door: string; amount: number };
}

/** The orders consumer and the charges endpoint on Kysely. */
export async function kyselyApp(
  databaseUrl: string,
  source: Source<OrderPlaced>,
): Promise<ExampleApp> {
  // #region layer
  const kyselyPool = new pg.Pool({ connectionString: databaseUrl });
  // Kysely attaches no 'error' listener to the client a transaction holds: without one,
  // a connection the server ends mid-transaction is an unhandled 'error' (a crash).
  kyselyPool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: kyselyPool }) });
  const dataLayer = kyselyLayer(db);
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
      // tx is Kysely's Transaction: the effect commits with the claim, or neither does.
      await tx
        .insertInto('layer_effects')
        .values({ id: `order-${order.orderId}`, door: 'consumer', amount: order.totalCents })
        .execute();
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
      .insertInto('layer_effects')
      .values({ id: `charge-${key}`, door: 'http', amount: amountCents })
      .execute();
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
export const main = (options: ExampleOptions): Promise<void> => runExample(kyselyApp, options);

await runDirectly(import.meta.url, main);
