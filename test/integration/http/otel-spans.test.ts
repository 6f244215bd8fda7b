import { createHash, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { Hono } from 'hono';
import {
  createIdempotency,
  type Idempotency,
  type IdempotencyOptions,
} from 'effectively-once/http';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { FRAMEWORKS } from '../../helpers/http/payments.js';
import { otelHarness, type OtelHarness } from '../../helpers/otel.js';
import { otelIdempotencyTelemetry } from '../../../src/otel/index.js';
import { startApp, type App } from './apps.js';
import { post } from './support.js';

let db: TestDatabase;
let otel: OtelHarness;
const started: Array<App | Idempotency> = [];

beforeAll(async () => {
  db = await createTestDatabase('http_otel_spans', { max: 10 });
});
beforeEach(() => {
  otel = otelHarness();
});
afterEach(async () => {
  for (const item of started.splice(0).reverse())
    await ('url' in item ? item.close() : item.close({ timeoutMs: 1000 }));
  await otel.shutdown();
});
afterAll(async () => {
  await db.close();
});

async function start(
  framework: (typeof FRAMEWORKS)[number],
  options: Partial<IdempotencyOptions> = {},
): Promise<App> {
  const idempotency = createIdempotency({
    pool: db.pool,
    schema: db.schema,
    scope: 'public',
    telemetry: otelIdempotencyTelemetry({
      tracerProvider: otel.tracerProvider,
      meterProvider: otel.meterProvider,
    }),
    ...options,
  });
  started.push(idempotency);
  const app = await startApp({
    framework,
    idempotency,
    run: async (ctx) => ({ status: 201, body: { key: ctx.key } }),
  });
  started.push(app);
  return app;
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

  it('the default route (the URL path) is no template: the span is named by the method alone', async () => {
    const app = await start(framework);
    const key = randomUUID();
    expect((await post(`${app.url}/run`, key, {})).status).toBe(201);
    const [span] = requestSpans();
    expect(span?.name).toBe('POST');
    expect(span?.attributes['http.route']).toBeUndefined();
    expect(Object.values(span?.attributes ?? {})).not.toContain(key);
    expect(JSON.stringify(span?.attributes)).not.toContain('/run');
  });
});

describe("an adapter passes the framework's route template", () => {
  it('RequestOverrides.routeTemplate names the span; the key stays bound to the path', async () => {
    const idempotency = createIdempotency({
      pool: db.pool,
      schema: db.schema,
      scope: 'public',
      telemetry: otelIdempotencyTelemetry({
        tracerProvider: otel.tracerProvider,
        meterProvider: otel.meterProvider,
      }),
    });
    started.push(idempotency);
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
    const { rows } = await db.pool.query<{ route: string }>(
      'SELECT route FROM eo_idempotency_keys ORDER BY created_at DESC LIMIT 1',
    );
    expect(rows[0]?.route).toBe('/orders/4242/refunds');
  });
});
