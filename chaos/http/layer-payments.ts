import Fastify from 'fastify';
import type pg from 'pg';
import { createIdempotency, type CommittedEvent } from 'effectively-once/http';
import { idempotencyContext, idempotencyPlugin } from 'effectively-once/http/fastify';
import type { OpenedLayer } from '../../kit/data-layers/index.js';
import { PAYMENT_TABLES, tenantOf, type Charge } from '../../kit/payments/payments.js';
import { quoteIdentifier } from '../../src/store/identifiers.js';

export interface LayerPaymentServerOptions {
  /** The data layer `ctx.tx` belongs to; the charge is written through its raw call. */
  data: OpenedLayer;
  /** The door's own pool (its key table, housekeeping), search_path the payment schema. */
  pool: pg.Pool;
  schema: string;
  port: number;
  onCommitted: (event: CommittedEvent) => void;
}

/**
 * The payment API's `POST /charges` (kit/payments/payments.ts) with its handler written
 * through a data layer (`--data-layer`): Fastify's idempotencyPlugin over an
 * `Idempotency` whose `dataLayer` is the layer, `ctx.tx` the layer's transaction
 * object, the charge inserted with the layer's own raw call. The answer is the payment
 * API's, byte for byte: 201, the charge as JSON, `Location`, a `Set-Cookie` and `X-Run`.
 */
export async function startLayerPaymentServer(
  options: LayerPaymentServerOptions,
): Promise<{ port: number; close(): Promise<void> }> {
  const { data, pool, schema } = options;
  await pool.query(PAYMENT_TABLES);
  const idempotency = createIdempotency({
    pool,
    dataLayer: data.layer,
    schema,
    scope: (request) => tenantOf(request.headers),
    onCommitted: options.onCommitted,
  });
  // Named with its schema: every layer's connections reach it, whatever their search_path.
  const charges = `${quoteIdentifier(schema)}.charges`;
  const app = Fastify();
  await app.register(idempotencyPlugin, { idempotency });
  app.post('/charges', async (request, reply) => {
    const ctx = idempotencyContext(request, idempotency);
    const body = request.body as { customerId?: unknown; amountCents?: unknown };
    const rows = await data.query(
      ctx.tx,
      `INSERT INTO ${charges} (tenant, customer_id, amount_cents, idem_key) VALUES ($1, $2, $3, $4) RETURNING id::text AS id`,
      [ctx.scope, String(body.customerId), Number(body.amountCents), ctx.key],
    );
    const id = rows[0]?.['id'];
    const created: Charge = {
      id: typeof id === 'string' ? id : '?',
      tenant: ctx.scope,
      customerId: String(body.customerId),
      amountCents: Number(body.amountCents),
      key: ctx.key,
    };
    reply
      .code(201)
      .header('location', `/charges/${created.id}`)
      .header('set-cookie', `session=${created.id}; HttpOnly`)
      .header('x-run', String(ctx.attempt));
    return created;
  });
  await app.listen({ port: options.port, host: '127.0.0.1' });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('not on TCP');
  return {
    port: address.port,
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
      await idempotency.close({ timeoutMs: 1000 });
    },
  };
}
