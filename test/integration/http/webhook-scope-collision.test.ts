/**
 * A webhook receiver's keys and an ordinary endpoint's keys, on one instance, never
 * meet, whatever scope an ordinary request gets: otherwise a request with no signature
 * to check claims a real delivery's id first, and the sender's genuine delivery is
 * refused (422, another endpoint's key) on every redelivery, never applied.
 *
 * Two ways an ordinary scope could spell a webhook's: a per-request tenant string
 * written like the composed scope (`["alpha","webhook:acme-billing"]`), and, where the
 * endpoint's scope is a constant (the webhook's keys under its namespace alone), an
 * adapter's per-request tenant named `webhook:acme-billing`.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import {
  createIdempotency,
  headerSource,
  type Idempotency,
  type IdempotencyContext,
  type WebhookOptions,
  webhookScope,
} from 'effectively-once/http';
import { appFixture, startApp, type App } from './apps.js';
import { answer } from './support.js';

const fixture = appFixture(
  'webhook_scope_collision',
  'CREATE TABLE events (tenant text, delivery text NOT NULL);' +
    ' CREATE TABLE charges (tenant text NOT NULL, key text NOT NULL)',
);

const webhook: WebhookOptions = {
  source: headerSource('acme-billing', 'X-Delivery'),
  verify: (request) => request.headers.get('x-signature') === 'ok',
};

async function receiver(idempotency: Idempotency): Promise<App> {
  return fixture.track(
    await startApp({
      framework: 'hono',
      idempotency,
      webhook,
      run: async (ctx, headers) => {
        await ctx.tx.query('INSERT INTO events (tenant, delivery) VALUES ($1, $2)', [
          headers.get('x-tenant'),
          ctx.key,
        ]);
        return { status: 200, body: { delivery: ctx.key } };
      },
    }),
  );
}

/** Claims `key` on an ordinary endpoint as tenant `tenant`: no signature asked. */
async function charge(app: App, tenant: string, key: string): Promise<number> {
  const response = await fetch(`${app.url}/run`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-tenant': tenant, 'idempotency-key': key },
    body: '{}',
  });
  await response.arrayBuffer();
  return response.status;
}

/** The sender's genuine delivery `id`, then whether it was applied once. */
async function deliver(
  app: App,
  id: string,
  tenant: string | undefined,
): Promise<{ status: number; applied: number | undefined }> {
  const delivery = await answer(
    await fetch(`${app.url}/run`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-signature': 'ok',
        ...(tenant !== undefined ? { 'x-tenant': tenant } : {}),
        'x-delivery': id,
      },
      body: JSON.stringify({ invoice: 'paid' }),
    }),
  );
  const { rows } = await fixture
    .db()
    .pool.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE delivery = $1', [id]);
  return { status: delivery.status, applied: rows[0]?.n };
}

const charging = async (ctx: IdempotencyContext): Promise<{ status: number; body: unknown }> => {
  await ctx.tx.query('INSERT INTO charges (tenant, key) VALUES ($1, $2)', [ctx.scope, ctx.key]);
  return { status: 201, body: { charged: ctx.key } };
};

describe('web core: a webhook key space no ordinary request reaches', () => {
  it("a tenant string spelled like a composed webhook scope does not block the tenant's deliveries", async () => {
    const db = fixture.db();
    const idempotency = fixture.track(
      createIdempotency({
        pool: db.pool,
        schema: db.schema,
        scope: (request) => request.headers.get('x-tenant') ?? 'public',
      }),
    );
    const hooks = await receiver(idempotency);
    const charges = fixture.track(
      await startApp({ framework: 'hono', idempotency, run: charging }),
    );
    const id = `evt_${randomUUID().slice(0, 8)}`;
    // An unsigned ordinary charge, its tenant header crafted, the delivery id as key.
    expect(await charge(charges, JSON.stringify(['alpha', 'webhook:acme-billing']), id)).toBe(201);
    // Before the fix: 422 (another endpoint's key), never applied.
    expect(await deliver(hooks, id, 'alpha')).toEqual({ status: 200, applied: 1 });
  });

  it("a tenant named like a constant webhook namespace does not block the sender's deliveries", async () => {
    const db = fixture.db();
    // A constant scope: the receiver's keys are under its namespace alone.
    const idempotency = fixture.track(
      createIdempotency({ pool: db.pool, schema: db.schema, scope: 'public' }),
    );
    const hooks = await receiver(idempotency);
    // An ordinary route whose adapter scopes by a tenant header.
    const charges = fixture.track(
      await startApp({
        framework: 'express',
        idempotency,
        scope: (headers) => headers.get('x-tenant') ?? 'public',
        run: charging,
      }),
    );
    const id = `evt_${randomUUID().slice(0, 8)}`;
    expect(await charge(charges, 'webhook:acme-billing', id)).toBe(201);
    // Before the fix: 422 (another endpoint's key), never applied.
    expect(await deliver(hooks, id, undefined)).toEqual({ status: 200, applied: 1 });
  });

  it("a plain scope spelled as a webhook's stored scope is refused: 500, nothing claimed", async () => {
    const db = fixture.db();
    const idempotency = fixture.track(
      createIdempotency({
        pool: db.pool,
        schema: db.schema,
        // A scope function returning what webhookScope stores: no ordinary request may.
        scope: (request) =>
          webhookScope('webhook:acme-billing', request.headers.get('x-tenant') ?? undefined),
      }),
    );
    const charges = fixture.track(
      await startApp({ framework: 'hono', idempotency, run: charging }),
    );
    const id = `evt_${randomUUID().slice(0, 8)}`;
    expect(await charge(charges, 'alpha', id)).toBe(500);
    const { rows } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM eo_idempotency_keys WHERE idempotency_key = $1',
      [id],
    );
    expect(rows[0]?.n).toBe(0);
  });
});
