/**
 * Hono middleware that reads the request body before the idempotent endpoint, by each
 * of Hono's readers, with the endpoint handed `honoRequest(c.req)`. Hono caches what
 * the first reader read: the bytes (`arrayBuffer`, `parseBody()`, `validator('form')`),
 * the text (`json()`, `text()`, `validator('json')`), or only a FormData
 * (`c.req.formData()` first). From bytes or text the Request is rebuilt as sent, so it
 * runs once, replays, and refuses another body under the key. From a FormData it cannot
 * be: Hono's own `cloneRawRequest` rebuilds it as multipart with a new random boundary
 * each time, so the first request ran and committed and every retry was answered 422
 * (a final answer for idempotentFetch, the outcome of the charge never learnt). That
 * shape is refused at the first request instead, before anything is claimed.
 */
import { randomUUID } from 'node:crypto';
import { serve } from '@hono/node-server';
import { describe, expect, it } from '@jest/globals';
import { Hono, type MiddlewareHandler } from 'hono';
import { validator } from 'hono/validator';
import { honoRequest, type Idempotency } from 'effectively-once/http';
import { CHARGE, completionFixture } from './completion-support.js';

const fixture = completionFixture('http_hono_form');

/** The form validator as Hono's docs write one: check, then the value or a 400. */
const validForm = validator('form', (value, c) =>
  value['customerId'] === undefined ? c.json({ invalid: true }, 400) : value,
);

/** Middleware as a form-auth or CSRF check writes it: reads the form, then goes on. */
const readers: Record<string, MiddlewareHandler> = {
  formData: async (c, next) => {
    const form = await c.req.formData();
    if (form.get('customerId') === null) return c.json({ invalid: true }, 400);
    await next();
  },
  parseBody: async (c, next) => {
    const form = await c.req.parseBody();
    if (form['customerId'] === undefined) return c.json({ invalid: true }, 400);
    await next();
  },
  text: async (c, next) => {
    await c.req.text();
    await next();
  },
  arrayBuffer: async (c, next) => {
    await c.req.arrayBuffer();
    await next();
  },
  // Nothing read: the Request goes as it came.
  none: async (_c, next) => {
    await next();
  },
};

async function serveHono(idempotency: Idempotency): Promise<string> {
  const charges = idempotency.handler(async (request, ctx) => {
    const form = await request.formData();
    const field = (name: string): string => {
      const value = form.get(name);
      if (typeof value !== 'string') throw new Error(`no ${name} field`);
      return value;
    };
    const { rows } = await ctx.tx.query<{ id: string }>(CHARGE, [
      ctx.key,
      field('customerId'),
      `amount ${field('amount')}`,
    ]);
    return Response.json({ id: rows[0]?.id, amount: field('amount') }, { status: 201 });
  });
  const app = new Hono();
  for (const [name, reader] of Object.entries(readers))
    app.post(`/${name}`, reader, async (c) => charges(await honoRequest(c.req)));
  app.post('/validator', validForm, async (c) => charges(await honoRequest(c.req)));
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
  body: string,
): Promise<{ status: number; replayed: boolean; json: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'idempotency-key': key },
    body,
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    json: (await response.json()) as Record<string, unknown>,
  };
}

describe('Hono: a form body read before the endpoint, honoRequest(c.req)', () => {
  it('c.req.formData() first (only a FormData cached): refused at the first request, nothing charged', async () => {
    const base = await serveHono(fixture.endpoint());
    const key = randomUUID();
    for (const attempt of [1, 2]) {
      const answer = await post(`${base}/formData`, key, 'customerId=cus_ok&amount=5');
      expect({ attempt, status: answer.status, json: answer.json }).toMatchObject({
        attempt,
        status: 500,
        json: {
          code: 'EO_REQUEST_BODY_CONSUMED',
          type: expect.stringMatching(/body-consumed$/) as unknown as string,
        },
      });
    }
    expect(await fixture.charges(key)).toBe(0);
  });

  it.each(['parseBody', 'validator', 'text', 'arrayBuffer', 'none'])(
    'read by %s: runs once, the byte-identical retry is replayed, another body is refused',
    async (reader) => {
      const base = await serveHono(fixture.endpoint());
      const key = randomUUID();
      const first = await post(`${base}/${reader}`, key, 'customerId=cus_ok&amount=5');
      expect(first).toMatchObject({ status: 201, replayed: false, json: { amount: '5' } });
      const retry = await post(`${base}/${reader}`, key, 'customerId=cus_ok&amount=5');
      expect(retry).toMatchObject({ status: 201, replayed: true, json: first.json });
      const other = await post(`${base}/${reader}`, key, 'customerId=cus_ok&amount=6');
      expect(other.status).toBe(422);
      expect(await fixture.charges(key)).toBe(1);
    },
  );
});
