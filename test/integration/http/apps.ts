/**
 * One endpoint on each framework, for tests whose handler does something the payment
 * API does not (a fault, a tenant from a header on a webhook route): the core on Hono,
 * Express through idempotentExpress, Fastify through idempotencyPlugin. Each serves
 * `POST /run` on loopback and answers what `run` returns, as JSON.
 */
import http from 'node:http';
import { afterAll, afterEach, beforeAll } from '@jest/globals';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import type { Idempotency, IdempotencyContext, WebhookOptions } from 'effectively-once/http';
import { idempotentExpress } from 'effectively-once/http/express';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { portOf, type Framework } from '../../../kit/payments/payments.js';

/** What the endpoint's handler does, and what it answers. */
export type Run = (
  ctx: IdempotencyContext,
  headers: Headers,
) => Promise<{ status: number; body: unknown }>;

export interface AppOptions {
  framework: Framework;
  idempotency: Idempotency;
  run: Run;
  /** Serve it as a webhook receiver. */
  webhook?: WebhookOptions;
  /** The adapter's per-request scope, from the request's headers (Express, Fastify). */
  scope?: (headers: Headers) => string;
  /** The route's path (Express, Fastify; default `/run`), under `mount` when given. */
  path?: string;
  /** A router's mount path (Express) or a plugin's prefix (Fastify). */
  mount?: string;
}

export interface App {
  url: string;
  close(): Promise<void>;
}

/** Starts the endpoint; close it after the test. */
export async function startApp(options: AppOptions): Promise<App> {
  switch (options.framework) {
    case 'hono':
      return startHono(options);
    case 'express':
      return startExpress(options);
    case 'fastify':
      return startFastify(options);
  }
}

function headersOf(raw: http.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(raw))
    if (typeof value === 'string') headers.set(name, value);
  return headers;
}

async function startHono({ idempotency, run, webhook }: AppOptions): Promise<App> {
  const app = new Hono();
  const endpoint =
    webhook === undefined
      ? idempotency.handler(async (request, ctx) => {
          const { status, body } = await run(ctx, request.headers);
          return Response.json(body, { status });
        })
      : idempotency.webhook(webhook, async (request, ctx) => {
          const { status, body } = await run(ctx, request.headers);
          return Response.json(body, { status });
        });
  app.post('/run', (c) => endpoint(c.req.raw));
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${portOf(server.address())}`,
    close: () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function startExpress(options: AppOptions): Promise<App> {
  const { idempotency, run, webhook, scope, path = '/run', mount } = options;
  const app = express();
  const router = mount === undefined ? app : express.Router();
  if (mount !== undefined) app.use(mount, router);
  router.post(
    path,
    idempotentExpress(
      idempotency,
      async (req, res, ctx) => {
        const { status, body } = await run(ctx, headersOf(req.headers));
        res.status(status).json(body);
      },
      {
        ...(webhook !== undefined ? { webhook } : {}),
        ...(scope !== undefined ? { scope: (req) => scope(headersOf(req.headers)) } : {}),
      },
    ),
  );
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${portOf(server.address())}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function startFastify(options: AppOptions): Promise<App> {
  const { idempotency, run, webhook, scope, path = '/run', mount } = options;
  const app = Fastify();
  await app.register(idempotencyPlugin, {
    idempotency,
    ...(scope !== undefined ? { scope: (request) => scope(headersOf(request.headers)) } : {}),
  });
  await app.register(
    async (routes) => {
      routes.post(
        path,
        { config: { idempotency: webhook === undefined ? {} : { webhook } } },
        async (request, reply) => {
          const ctx = request.idempotency;
          if (ctx === null) throw new Error('not idempotent');
          const { status, body } = await run(ctx, headersOf(request.headers));
          return reply.code(status).send(body);
        },
      );
    },
    mount === undefined ? {} : { prefix: mount },
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${portOf(app.server.address())}`,
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}

/**
 * One schema per test file (with `setup`'s tables), and the endpoints and apps a test
 * started, closed after it (apps first).
 */
export function appFixture(
  prefix: string,
  setup = '',
  poolMax = 10,
): { db: () => TestDatabase; track: <T extends App | Idempotency>(item: T) => T } {
  let db: TestDatabase | undefined;
  const started: Array<App | Idempotency> = [];
  beforeAll(async () => {
    db = await createTestDatabase(prefix, { max: poolMax });
    if (setup !== '') await db.pool.query(setup);
  });
  afterEach(async () => {
    for (const item of started.splice(0).reverse())
      await ('url' in item ? item.close() : item.close({ timeoutMs: 1000 }));
  });
  afterAll(async () => {
    await db?.close();
  });
  return {
    db: () => {
      if (db === undefined) throw new Error('no database yet');
      return db;
    },
    track: (item) => {
      started.push(item);
      return item;
    },
  };
}
