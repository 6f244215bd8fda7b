/**
 * A small payment API on effectively-once/http, the same on every framework: the
 * integration tests, the crash test's child process, and whoever builds chaos / demo /
 * bench on top start it with {@link startPaymentServer}.
 *
 * Endpoints (scope: the `x-tenant` header, default `t0`):
 * - `POST /charges` `{ customerId, amountCents }` → 201 `{ id, tenant, customerId,
 *   amountCents, key }`, `Location: /charges/<id>`, a `Set-Cookie` (never stored) and
 *   `X-Run` (the handler run's attempt, not stored). One row in `charges` per effect.
 * - `POST /big?bytes=N[&stream=1]` → 200 with N bytes of text (streamed when asked),
 *   one `charges` row.
 * - `POST /webhooks/{github,stripe,shopify,generic}` → 200 `{ received }`; one row in
 *   `deliveries` per applied delivery. Verified when `x-test-signature: ok`. The
 *   generic receiver keys on the `delivery.id` body field.
 */
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import {
  bodyFieldSource,
  createIdempotency,
  webhookSources,
  type Idempotency,
  type IdempotencyContext,
  type IdempotencyOptions,
  type WebhookOptions,
  type WebhookSource,
} from 'effectively-once/http';

export type Framework = 'hono' | 'express' | 'fastify';
export const FRAMEWORKS: readonly Framework[] = ['hono', 'express', 'fastify'];

/** Test hooks, run inside the handler's transaction. */
export interface PaymentHooks {
  /** Awaited before the effect: hold it to keep an original "running". */
  beforeEffect?: (key: string) => Promise<void>;
  /** After the effect: throw, or answer this 5xx (both roll the effect back). */
  fail?: (key: string) => 'throw' | number | undefined;
  /**
   * After the effect, a SQLSTATE to raise through `ctx.tx` on this run of the handler
   * (`40001`: a serialization failure, run again in place).
   */
  raise?: (key: string, attempt: number) => string | undefined;
}

export interface PaymentServerOptions {
  framework: Framework;
  pool: pg.Pool;
  /** Default 0 (a free port). */
  port?: number;
  /** Schema of the key table (and of the payment tables, via the pool's search_path). */
  schema?: string;
  /** Endpoint options on top of the defaults (pool, scope by `x-tenant`). */
  idempotency?: Partial<IdempotencyOptions>;
  hooks?: PaymentHooks;
}

export interface PaymentServer {
  readonly url: string;
  readonly port: number;
  readonly idempotency: Idempotency;
  close(): Promise<void>;
}

export const PAYMENT_TABLES = `
  CREATE TABLE IF NOT EXISTS charges (
    id           bigserial PRIMARY KEY,
    tenant       text   NOT NULL,
    customer_id  text   NOT NULL,
    amount_cents bigint NOT NULL,
    idem_key     text   NOT NULL
  );
  CREATE TABLE IF NOT EXISTS deliveries (
    sender      text NOT NULL,
    delivery_id text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
  )`;

export interface Charge {
  id: string;
  tenant: string;
  customerId: string;
  amountCents: number;
  key: string;
}

/** The effect of `POST /charges`, through the claim's transaction. */
export async function charge(
  ctx: IdempotencyContext,
  body: { customerId?: unknown; amountCents?: unknown },
  hooks: PaymentHooks,
): Promise<Charge> {
  await hooks.beforeEffect?.(ctx.key);
  const { rows } = await ctx.tx.query<{ id: string }>(
    'INSERT INTO charges (tenant, customer_id, amount_cents, idem_key) VALUES ($1, $2, $3, $4) RETURNING id',
    [ctx.scope, String(body.customerId), Number(body.amountCents), ctx.key],
  );
  const sqlstate = hooks.raise?.(ctx.key, ctx.attempt);
  if (sqlstate !== undefined)
    await ctx.tx.query(
      `DO $$ BEGIN RAISE EXCEPTION 'raised by the test' USING ERRCODE = '${sqlstate}'; END $$`,
    );
  return {
    id: rows[0]?.id ?? '?',
    tenant: ctx.scope,
    customerId: String(body.customerId),
    amountCents: Number(body.amountCents),
    key: ctx.key,
  };
}

/** The effect of `POST /big`. */
export async function bigEffect(ctx: IdempotencyContext): Promise<void> {
  await ctx.tx.query(
    "INSERT INTO charges (tenant, customer_id, amount_cents, idem_key) VALUES ($1, 'big', 0, $2)",
    [ctx.scope, ctx.key],
  );
}

/** The effect of a webhook delivery. */
export async function recordDelivery(ctx: IdempotencyContext, sender: string): Promise<void> {
  await ctx.tx.query('INSERT INTO deliveries (sender, delivery_id) VALUES ($1, $2)', [
    sender,
    ctx.key,
  ]);
}

export const WEBHOOK_SOURCES: Record<string, WebhookSource> = {
  github: webhookSources.github,
  stripe: webhookSources.stripe,
  shopify: webhookSources.shopify,
  generic: bodyFieldSource('generic', ['delivery', 'id']),
};

export function webhookOptions(sender: string): WebhookOptions {
  const source = WEBHOOK_SOURCES[sender];
  if (source === undefined) throw new Error(`no webhook source ${sender}`);
  return { source, verify: (request) => request.headers.get('x-test-signature') === 'ok' };
}

/** N bytes of text, the same for the same N. */
export function bigText(bytes: number): string {
  return 'abcdefghij'.repeat(Math.ceil(bytes / 10)).slice(0, bytes);
}

export function tenantOf(headers: { get(name: string): string | null }): string {
  return headers.get('x-tenant') ?? 't0';
}

export async function startPaymentServer(options: PaymentServerOptions): Promise<PaymentServer> {
  await options.pool.query(PAYMENT_TABLES);
  const idempotency = createIdempotency({
    pool: options.pool,
    scope: (request) => tenantOf(request.headers),
    ...(options.schema !== undefined ? { schema: options.schema } : {}),
    ...options.idempotency,
  });
  const hooks = options.hooks ?? {};
  const port = options.port ?? 0;
  const started = await serve(options.framework, idempotency, hooks, port);
  return {
    url: `http://127.0.0.1:${started.port}`,
    port: started.port,
    idempotency,
    close: async () => {
      await started.close();
      await idempotency.close({ timeoutMs: 1000 });
    },
  };
}

interface Started {
  port: number;
  close(): Promise<void>;
}

async function serve(
  framework: Framework,
  idempotency: Idempotency,
  hooks: PaymentHooks,
  port: number,
): Promise<Started> {
  switch (framework) {
    case 'hono':
      return (await import('./hono-app.js')).serveHono(idempotency, hooks, port);
    case 'express':
      return (await import('./express-app.js')).serveExpress(idempotency, hooks, port);
    case 'fastify':
      return (await import('./fastify-app.js')).serveFastify(idempotency, hooks, port);
  }
}

/** The port a listening node server got. */
export function portOf(address: string | AddressInfo | null): number {
  if (address === null || typeof address === 'string') throw new Error('not listening on TCP');
  return address.port;
}
