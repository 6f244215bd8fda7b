/**
 * Hono with middleware that reads the request body before the idempotent endpoint: a
 * `validator('json')` (from `hono/validator`, what `zValidator` builds on) or a
 * middleware that awaits `c.req.json()`. Hono reads the body off `c.req.raw` then, and
 * caches it on `c.req`; Hono's own `cloneRawRequest(c.req)` (from `hono/request`) and
 * the library's `honoRequest(c.req)` rebuild a Request from that cache (for a form
 * read by `c.req.formData()`, see hono-form-body.test.ts). Handing the endpoint the
 * consumed `c.req.raw` is refused at the first request with a problem naming the
 * cause, never run as if the body were empty, and never a bare `handler-failed`.
 */
import { randomUUID } from 'node:crypto';
import { serve } from '@hono/node-server';
import { describe, expect, it } from '@jest/globals';
import { Hono, type MiddlewareHandler } from 'hono';
import { cloneRawRequest } from 'hono/request';
import { validator } from 'hono/validator';
import { honoRequest, type Idempotency } from 'effectively-once/http';
import { CHARGE, completionFixture } from './completion-support.js';

const fixture = completionFixture('http_hono_consumed');

interface Order {
  customerId: string;
  amount: number;
}

/** The validator as Hono's docs write one: check, then return the value or a 400. */
const validOrder = validator('json', (value, c) => {
  const order = value as Partial<Order>;
  if (typeof order.customerId !== 'string' || typeof order.amount !== 'number')
    return c.json({ invalid: true }, 400);
  return order as Order;
});

/** Middleware that reads the body first (logging, auth over the body …). */
const readsBody: MiddlewareHandler = async (c, next) => {
  await c.req.json();
  await next();
};

async function serveHono(idempotency: Idempotency): Promise<string> {
  const charges = idempotency.handler(async (request, ctx) => {
    const order = (await request.json()) as Order;
    const { rows } = await ctx.tx.query<{ id: string }>(CHARGE, [
      ctx.key,
      order.customerId,
      `amount ${order.amount}`,
    ]);
    return Response.json({ id: rows[0]?.id, order }, { status: 201 });
  });
  const app = new Hono();
  app.post('/validated/raw', validOrder, (c) => charges(c.req.raw));
  app.post('/validated/cloned', validOrder, async (c) => charges(await cloneRawRequest(c.req)));
  app.post('/read/cloned', readsBody, async (c) => charges(await cloneRawRequest(c.req)));
  app.post('/validated/hono', validOrder, async (c) => charges(await honoRequest(c.req)));
  app.post('/read/hono', readsBody, async (c) => charges(await honoRequest(c.req)));
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  fixture.later(
    () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('not on TCP');
  return `http://127.0.0.1:${address.port}`;
}

async function post(
  url: string,
  key: string,
  body: unknown,
): Promise<{ status: number; replayed: boolean; json: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    json: (await response.json()) as Record<string, unknown>,
  };
}

describe('Hono: the body read before the endpoint', () => {
  it('c.req.raw after validator(): refused at the first request with a problem that names the cause; nothing runs', async () => {
    const base = await serveHono(fixture.endpoint());
    const key = randomUUID();
    const answer = await post(`${base}/validated/raw`, key, { customerId: 'cus_ok', amount: 5 });
    expect(answer.status).toBe(500);
    expect(answer.json).toMatchObject({
      code: 'EO_REQUEST_BODY_CONSUMED',
      type: expect.stringMatching(/body-consumed$/),
    });
    expect(await fixture.charges(key)).toBe(0);
  });

  it.each(['/validated/cloned', '/read/cloned', '/validated/hono', '/read/hono'])(
    '%s: cloneRawRequest(c.req) or honoRequest(c.req) hands the endpoint the body: runs once, replays, refuses another body',
    async (path) => {
      const base = await serveHono(fixture.endpoint());
      const key = randomUUID();
      const order = { customerId: 'cus_ok', amount: 5 };
      const first = await post(`${base}${path}`, key, order);
      expect(first).toMatchObject({ status: 201, replayed: false, json: { order } });
      const replay = await post(`${base}${path}`, key, order);
      expect(replay).toMatchObject({ status: 201, replayed: true, json: first.json });
      const other = await post(`${base}${path}`, key, { ...order, amount: 6 });
      expect(other.status).toBe(422);
      expect(await fixture.charges(key)).toBe(1);
    },
  );
});
