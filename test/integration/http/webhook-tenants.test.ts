import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import {
  createIdempotency,
  headerSource,
  type WebhookOptions,
  webhookScope,
} from 'effectively-once/http';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { appFixture, startApp, type App } from './apps.js';
import { answer, type Answer } from './support.js';

const fixture = appFixture(
  'http_webhook_tenants',
  'CREATE TABLE events (tenant text NOT NULL, delivery text NOT NULL)',
  20,
);

// A sender that numbers deliveries per account: two tenants see the same ids.
const webhook: WebhookOptions = {
  source: headerSource('acme-billing', 'X-Delivery'),
  verify: (request) => request.headers.get('x-signature') === 'ok',
};
const tenantOf = (headers: Headers): string => headers.get('x-tenant') ?? 'none';

/**
 * The tenant scope where each framework takes it: the adapter's per-request `scope`
 * (Express, Fastify), or the endpoint's scope function (the web core).
 */
async function start(framework: (typeof FRAMEWORKS)[number], scope?: string): Promise<App> {
  const db = fixture.db();
  const idempotency = fixture.track(
    createIdempotency({
      pool: db.pool,
      schema: db.schema,
      scope: scope ?? (framework === 'hono' ? (request) => tenantOf(request.headers) : 'unused'),
    }),
  );
  return fixture.track(
    await startApp({
      framework,
      idempotency,
      webhook,
      ...(scope === undefined && framework !== 'hono' ? { scope: tenantOf } : {}),
      run: async (ctx, headers) => {
        const tenant = tenantOf(headers);
        await ctx.tx.query('INSERT INTO events (tenant, delivery) VALUES ($1, $2)', [
          tenant,
          ctx.key,
        ]);
        return { status: 200, body: { tenant, delivery: ctx.key } };
      },
    }),
  );
}

async function deliver(app: App, tenant: string, id: string): Promise<Answer> {
  return answer(
    await fetch(`${app.url}/run`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-signature': 'ok',
        'x-tenant': tenant,
        'x-delivery': id,
      },
      body: JSON.stringify({ account: tenant, invoice: 'paid' }),
    }),
  );
}

async function applied(tenant: string, id: string): Promise<number> {
  const { rows } = await fixture
    .db()
    .pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM events WHERE tenant = $1 AND delivery = $2',
      [tenant, id],
    );
  return rows[0]?.n ?? -1;
}

describe.each(FRAMEWORKS)('%s: webhook delivery ids are scoped by tenant too', (framework) => {
  it("two tenants' deliveries with one id: both applied, neither gets the other's answer", async () => {
    const app = await start(framework);
    const id = `evt_${randomUUID().slice(0, 8)}`;
    const alpha = await deliver(app, 'alpha', id);
    const bravo = await deliver(app, 'bravo', id);
    expect(alpha.status).toBe(200);
    expect(bravo.status).toBe(200);
    expect(JSON.parse(alpha.body)).toEqual({ tenant: 'alpha', delivery: id });
    expect(JSON.parse(bravo.body)).toEqual({ tenant: 'bravo', delivery: id });
    expect(bravo.headers['idempotent-replayed']).toBeUndefined();
    expect(await applied('alpha', id)).toBe(1);
    expect(await applied('bravo', id)).toBe(1);
    // Each tenant's redelivery replays its own answer.
    const again = await deliver(app, 'bravo', id);
    expect(again).toMatchObject({ status: 200, body: bravo.body });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await applied('bravo', id)).toBe(1);
  });
});

describe('a composed scope', () => {
  it('must fit 1024 characters: a longer one fails the delivery, nothing applied', async () => {
    const app = await start('hono');
    const tenant = 't'.repeat(1000);
    const id = `evt_${randomUUID().slice(0, 8)}`;
    expect((await deliver(app, tenant, id)).status).toBe(500);
    expect(await applied(tenant, id)).toBe(0);
    expect((await deliver(app, 't'.repeat(900), id)).status).toBe(200);
  });
});

describe('where a delivery is stored: webhookScope(door, tenant), out of plain scopes', () => {
  it.each([
    ['a per-request tenant', undefined, ['alpha', 'webhook:acme-billing']],
    ['a constant scope', 'public', ['webhook:acme-billing']],
  ] as const)(
    '%s: the key row is under U+001F and the JSON of the pair',
    async (_, scope, pair) => {
      const app = await start('hono', scope);
      const id = `evt_${randomUUID().slice(0, 8)}`;
      expect((await deliver(app, 'alpha', id)).status).toBe(200);
      const { rows } = await fixture
        .db()
        .pool.query<{ scope: string }>(
          'SELECT scope FROM eo_idempotency_keys WHERE idempotency_key = $1',
          [id],
        );
      const expected = webhookScope(
        'webhook:acme-billing',
        pair.length === 2 ? 'alpha' : undefined,
      );
      expect(rows).toEqual([{ scope: expected }]);
      expect(expected).toBe(`\u001f${JSON.stringify(pair)}`);
    },
  );
});
