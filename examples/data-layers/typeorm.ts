/**
 * TypeORM: an orders consumer, a charges endpoint and an outbox row, each written with the
 * `EntityManager` of TypeORM's own transaction (`ctx.tx` is the manager
 * `dataSource.transaction(async (manager) => …)` hands over), where the library claims the
 * key, stores the answer and commits them together.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=… SQS_ENDPOINT=… PORT=3000 \
 *     npx tsx examples/data-layers/typeorm.ts
 */
import pg from 'pg';
import { DataSource, EntitySchema } from 'typeorm';
import { createConsumer, type Source } from 'effectively-once';
import { createIdempotency } from 'effectively-once/http';
import { enqueue } from 'effectively-once/outbox';
import { typeormLayer } from 'effectively-once/typeorm';
import {
  runDirectly,
  runExample,
  type ChargeRequest,
  type ExampleApp,
  type ExampleOptions,
  type OrderPlaced,
} from './run.js';

// #region schema
/** One row of the effects table. */
export interface Effect {
  id: string;
  door: string;
  amount: number;
}

/** The effects table, as the app declares it for TypeORM (an entity schema, no decorators). */
export const LayerEffect = new EntitySchema<Effect>({
  name: 'LayerEffect',
  tableName: 'layer_effects',
  columns: {
    id: { type: 'text', primary: true },
    door: { type: 'text' },
    amount: { type: 'integer' },
  },
});
// #endregion

/** The orders consumer and the charges endpoint on TypeORM. */
export async function typeormApp(
  databaseUrl: string,
  source: Source<OrderPlaced>,
): Promise<ExampleApp> {
  // #region layer
  const dataSource = new DataSource({
    type: 'postgres',
    url: databaseUrl,
    entities: [LayerEffect],
  });
  await dataSource.initialize();
  const dataLayer = typeormLayer(dataSource);
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
      // tx is TypeORM's EntityManager: the effect commits with the claim, or neither does.
      await tx.getRepository(LayerEffect).insert({
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
    await tx
      .getRepository(LayerEffect)
      .insert({ id: `charge-${key}`, door: 'http', amount: amountCents });
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
      await dataSource.destroy();
      await pool.end();
    },
  };
}

/** Runs the consumer and the endpoint until `signal` aborts. */
export const main = (options: ExampleOptions): Promise<void> => runExample(typeormApp, options);

await runDirectly(import.meta.url, main);
