/**
 * docs/http.md: the route a key is bound to is, by default, the URL's path as the client
 * sent it (Express: `req.originalUrl`'s, the mount prefix included; not `req.path`, not
 * the route template), and `route` sets a template instead, which then no longer tells
 * `/orders/1` from `/orders/2`. Loopback servers, real Postgres.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import express, { type Request } from 'express';
import Fastify, { type FastifyRequest } from 'fastify';
import { createIdempotency, type Idempotency } from '../../../src/http/index.js';
import { idempotentExpress } from '../../../adapters/express/index.js';
import { idempotencyPlugin } from '../../../adapters/fastify/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  db = await createTestDatabase('default_route');
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
afterAll(async () => {
  await db.close();
});

function endpoint(route?: (request: globalThis.Request) => string): Idempotency {
  const idempotency = createIdempotency({
    pool: db.pool,
    schema: db.schema,
    scope: randomUUID(), // a scope per endpoint: the tests' keys never meet
    ...(route === undefined ? {} : { route }),
  });
  cleanups.push(() => idempotency.close());
  return idempotency;
}

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const post = async (url: string, key: string) => {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'idempotency-key': key, 'content-type': 'application/json' },
    body: '{"amountCents":500}',
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    body: (await response.json()) as Record<string, unknown>,
  };
};

const storedRoute = async (key: string): Promise<string | undefined> => {
  const { rows } = await db.pool.query<{ route: string }>(
    'SELECT route FROM eo_idempotency_keys WHERE idempotency_key = $1',
    [key],
  );
  return rows[0]?.route;
};

/** Express: routers under /v1 and /v2 answer POST /orders/:id/refunds. */
async function expressServer(route?: (req: Request) => string): Promise<string> {
  const idempotency = endpoint();
  const app = express();
  for (const version of ['v1', 'v2']) {
    const router = express.Router();
    router.post(
      '/orders/:id/refunds',
      idempotentExpress(
        idempotency,
        (req, res) => {
          res.status(201).json({ refunded: `${version}:${String(req.params.id)}` });
        },
        route === undefined ? {} : { route },
      ),
    );
    app.use(`/${version}`, router);
  }
  return listen(http.createServer(app));
}

/** Fastify: POST /orders/:id/refunds. */
async function fastifyServer(route?: (request: FastifyRequest) => string): Promise<string> {
  const app = Fastify();
  await app.register(idempotencyPlugin, {
    idempotency: endpoint(),
    ...(route === undefined ? {} : { route }),
  });
  app.post<{ Params: { id: string } }>('/orders/:id/refunds', async (request, reply) =>
    reply.code(201).send({ refunded: request.params.id }),
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  cleanups.push(async () => {
    app.server.closeAllConnections();
    await app.close();
  });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

describe('the default route is the URL path', () => {
  it('Express: the path with its mount prefix (originalUrl), not req.path, not the template', async () => {
    const url = await expressServer();
    const key = randomUUID();
    expect(await post(`${url}/v1/orders/1/refunds`, key)).toMatchObject({ status: 201 });
    expect(await storedRoute(key)).toBe('/v1/orders/1/refunds');
    // Same req.path ("/orders/1/refunds"), same template: still another endpoint.
    const mounted = await post(`${url}/v2/orders/1/refunds`, key);
    expect(mounted).toMatchObject({ status: 422, body: { code: 'EO_IDEMPOTENCY_KEY_REUSED' } });
    expect(mounted.body.type).toMatch(/key-reused-on-another-endpoint$/);
    const otherOrder = await post(`${url}/v1/orders/2/refunds`, key);
    expect(otherOrder).toMatchObject({ status: 422 });
  });

  it('Fastify: the path, not routeOptions.url', async () => {
    const url = await fastifyServer();
    const key = randomUUID();
    expect(await post(`${url}/orders/1/refunds?dry=0`, key)).toMatchObject({ status: 201 });
    expect(await storedRoute(key)).toBe('/orders/1/refunds'); // the query is fingerprinted, not routed
    expect(await post(`${url}/orders/2/refunds?dry=0`, key)).toMatchObject({ status: 422 });
  });

  it('the web core: new URL(request.url).pathname', async () => {
    const handle = endpoint().handler(() => Response.json({ ok: true }, { status: 201 }));
    const key = randomUUID();
    const response = await handle(
      new Request('http://api.test/orders/1/refunds?x=1', {
        method: 'POST',
        headers: { 'idempotency-key': key },
      }),
    );
    expect(response.status).toBe(201);
    expect(await storedRoute(key)).toBe('/orders/1/refunds');
  });
});

describe('a route template, set with `route`', () => {
  it('Express (req.baseUrl + req.route.path): /orders/2 replays the answer of /orders/1', async () => {
    const url = await expressServer(
      (req) => `${req.baseUrl}${String((req.route as { path?: unknown } | undefined)?.path)}`,
    );
    const key = randomUUID();
    expect(await post(`${url}/v1/orders/1/refunds`, key)).toMatchObject({
      status: 201,
      body: { refunded: 'v1:1' },
    });
    expect(await storedRoute(key)).toBe('/v1/orders/:id/refunds');
    // The parameter is no longer compared: same key and body, another order, a replay.
    expect(await post(`${url}/v1/orders/2/refunds`, key)).toEqual({
      status: 201,
      replayed: true,
      body: { refunded: 'v1:1' },
    });
    expect(await post(`${url}/v2/orders/1/refunds`, key)).toMatchObject({ status: 422 });
  });

  it('Fastify (request.routeOptions.url): the same', async () => {
    const url = await fastifyServer((request) => request.routeOptions.url ?? request.url);
    const key = randomUUID();
    expect(await post(`${url}/orders/1/refunds`, key)).toMatchObject({ status: 201 });
    expect(await storedRoute(key)).toBe('/orders/:id/refunds');
    expect(await post(`${url}/orders/2/refunds`, key)).toEqual({
      status: 201,
      replayed: true,
      body: { refunded: '1' },
    });
  });

  it('the web core: createIdempotency({ route })', async () => {
    const handle = endpoint(() => '/orders/:id/refunds').handler(() =>
      Response.json({ ok: true }, { status: 201 }),
    );
    const key = randomUUID();
    const request = () =>
      new Request('http://api.test/orders/7/refunds', {
        method: 'POST',
        headers: { 'idempotency-key': key },
      });
    expect((await handle(request())).status).toBe(201);
    expect(await storedRoute(key)).toBe('/orders/:id/refunds');
  });
});
