/**
 * Prisma 7: an orders consumer, a charges endpoint and an outbox row, each written with
 * Prisma's transaction client inside Prisma's own interactive transaction (`ctx.tx` is the
 * client `prisma.$transaction(async (tx) => …)` hands over), where the library claims the
 * key, stores the answer and commits them together. `PrismaClient` is the client
 * `prisma generate` made from your schema (here the tests' kit/prisma/schema.prisma, model
 * `LayerEffect` on the table `layer_effects`); `@prisma/adapter-pg` runs it without engine
 * binaries.
 *
 *   DATABASE_URL=postgres://… QUEUE_URL=… SQS_ENDPOINT=… PORT=3000 \
 *     npx tsx examples/data-layers/prisma.ts
 */
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { createConsumer, type Source } from 'effectively-once';
import { createIdempotency } from 'effectively-once/http';
import { enqueue } from 'effectively-once/outbox';
import { prismaLayer } from 'effectively-once/prisma';
import { PrismaClient } from '../../kit/prisma/generated/client.js';
import {
  runDirectly,
  runExample,
  type ChargeRequest,
  type ExampleApp,
  type ExampleOptions,
  type OrderPlaced,
} from './run.js';

/** The orders consumer and the charges endpoint on Prisma. */
export async function prismaApp(
  databaseUrl: string,
  source: Source<OrderPlaced>,
): Promise<ExampleApp> {
  // #region layer
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl }) });
  const dataLayer = prismaLayer(prisma);
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
      // tx is Prisma's transaction client: the effect commits with the claim, or neither does.
      await tx.layerEffect.create({
        data: { id: `order-${order.orderId}`, door: 'consumer', amount: order.totalCents },
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
    await tx.layerEffect.create({
      data: { id: `charge-${key}`, door: 'http', amount: amountCents },
    });
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
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

/** Runs the consumer and the endpoint until `signal` aborts. */
export const main = (options: ExampleOptions): Promise<void> => runExample(prismaApp, options);

await runDirectly(import.meta.url, main);
