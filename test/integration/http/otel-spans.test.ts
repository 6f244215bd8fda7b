import { createHash, randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Hono } from 'hono';
import {
  createIdempotency,
  type Idempotency,
  type IdempotencyOptions,
} from 'effectively-once/http';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { otelHarness, type OtelHarness } from '../../helpers/otel.js';
import { otelIdempotencyTelemetry } from '../../../src/otel/index.js';
import { appFixture, startApp, type App } from './apps.js';
import { post } from './support.js';

const fixture = appFixture('http_otel_spans');
let otel: OtelHarness;

beforeEach(() => {
  otel = otelHarness();
});
afterEach(async () => {
  await otel.shutdown();
});

/** An endpoint on the fixture's schema, traced into the harness. */
function endpoint(options: Partial<IdempotencyOptions> = {}): Idempotency {
  const db = fixture.db();
  return fixture.track(
    createIdempotency({
      pool: db.pool,
      schema: db.schema,
      scope: 'public',
      telemetry: otelIdempotencyTelemetry({
        tracerProvider: otel.tracerProvider,
        meterProvider: otel.meterProvider,
      }),
      ...options,
    }),
  );
}

async function start(
  framework: (typeof FRAMEWORKS)[number],
  options: Partial<IdempotencyOptions> = {},
): Promise<App> {
  return fixture.track(
    await startApp({
      framework,
      idempotency: endpoint(options),
      run: async (ctx) => ({ status: 201, body: { key: ctx.key } }),
    }),
  );
}

function requestSpans() {
  return otel.spans().filter((s) => s.instrumentationScope.name === 'effectively-once');
}

describe.each(FRAMEWORKS)('%s: request spans carry no raw path and no raw key', (framework) => {
  it('a route template names the span and is http.route; the key is only hashed', async () => {
    const app = await start(framework, { route: () => '/run/:account' });
    const key = `secret-${randomUUID()}`;
    expect((await post(`${app.url}/run?account=4242`, key, {})).status).toBe(201);
    const [span] = requestSpans();
    expect(span?.name).toBe('POST /run/:account');
    expect(span?.attributes['http.route']).toBe('/run/:account');
    expect(span?.attributes['effectively_once.key.sha256']).toBe(
      createHash('sha256').update(key).digest('hex'),
    );
    expect(JSON.stringify(span?.attributes)).not.toContain(key);
  });

  it('the default route: the core knows no template (the span is named by the method); an adapter passes its route’s', async () => {
    const app = await start(framework);
    const key = randomUUID();
    expect((await post(`${app.url}/run`, key, {})).status).toBe(201);
    const [span] = requestSpans();
    const template = framework === 'hono' ? undefined : '/run';
    expect(span?.name).toBe(template === undefined ? 'POST' : `POST ${template}`);
    expect(span?.attributes['http.route']).toBe(template);
    expect(Object.values(span?.attributes ?? {})).not.toContain(key);
  });
});

describe('Express and Fastify name the span by their matched route, not the path', () => {
  it.each(['express', 'fastify'] as const)('%s', async (framework) => {
    const idempotency = endpoint();
    const run = async () => ({ status: 201, body: { ok: true } });
    const app = fixture.track(
      await startApp({ framework, idempotency, run, path: '/orders/:id/refunds', mount: '/v1' }),
    );
    expect((await post(`${app.url}/v1/orders/4242/refunds`, randomUUID(), {})).status).toBe(201);
    const [span] = requestSpans();
    expect(span?.name).toBe('POST /v1/orders/:id/refunds');
    expect(span?.attributes['http.route']).toBe('/v1/orders/:id/refunds');
    expect(JSON.stringify(span?.attributes)).not.toContain('4242');
  });
});

describe("an adapter passes the framework's route template", () => {
  it('RequestOverrides.routeTemplate names the span; the key stays bound to the path', async () => {
    const idempotency = endpoint();
    const app = new Hono();
    app.post('/orders/:id/refunds', (c) =>
      idempotency.handle(c.req.raw, async (_request, ctx) => Response.json({ key: ctx.key }), {
        routeTemplate: c.req.routePath,
      }),
    );
    const response = await app.request('http://localhost/orders/4242/refunds', {
      method: 'POST',
      headers: { 'idempotency-key': randomUUID() },
    });
    expect(response.status).toBe(200);
    const [span] = requestSpans();
    expect(span?.name).toBe('POST /orders/:id/refunds');
    expect(span?.attributes['http.route']).toBe('/orders/:id/refunds');
    const { rows } = await fixture
      .db()
      .pool.query<{ route: string }>(
        'SELECT route FROM eo_idempotency_keys ORDER BY created_at DESC LIMIT 1',
      );
    expect(rows[0]?.route).toBe('/orders/4242/refunds');
  });
});
