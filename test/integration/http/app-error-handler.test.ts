/**
 * docs/http.md promises that the library's own refusals (400, 409, 413, 422, 503) stay
 * `application/problem+json` under an app's error handler, on Express and Fastify: only
 * what the handler throws reaches that handler. Loopback servers, real Postgres.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import express, { type NextFunction, type Request, type Response } from 'express';
import Fastify from 'fastify';
import { createIdempotency, type Idempotency } from '../../../src/http/index.js';
import { idempotentExpress } from '../../../adapters/express/index.js';
import { idempotencyPlugin } from '../../../adapters/fastify/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { gate } from './support.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('app_error_handler');
});

afterAll(async () => {
  await db.close();
});

/** What every app's own error handler answers: not a problem document. */
const APP_ERROR = { appErrorHandler: true };

interface App {
  url: string;
  idempotency: Idempotency;
  /** Held open until `hold.open()`, for a request still in progress. */
  hold: ReturnType<typeof gate>;
  started: ReturnType<typeof gate>;
  close(): Promise<void>;
}

function endpoint(): Idempotency {
  return createIdempotency({
    pool: db.pool,
    schema: db.schema,
    scope: 'public',
    concurrent: 'reject',
    maxRequestBytes: 64,
  });
}

async function expressApp(): Promise<App> {
  const idempotency = endpoint();
  const hold = gate();
  const started = gate();
  const app = express();
  app.post(
    '/charges',
    idempotentExpress(idempotency, async (req, res) => {
      const body = req.body as { hold?: boolean; fail?: boolean };
      if (body.hold === true) {
        started.open();
        await hold.wait;
      }
      if (body.fail === true) throw new Error('handler failed');
      res.status(201).json({ ok: true });
    }),
  );
  app.use((_err: unknown, _req: Request, res: Response, _next: NextFunction) => {
    res.status(500).json(APP_ERROR);
  });
  const server = http.createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    idempotency,
    hold,
    started,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function fastifyApp(): Promise<App> {
  const idempotency = endpoint();
  const hold = gate();
  const started = gate();
  const app = Fastify({ bodyLimit: 1000 });
  app.setErrorHandler(async (_error, _request, reply) => reply.code(500).send(APP_ERROR));
  await app.register(idempotencyPlugin, { idempotency });
  app.post('/charges', async (request, reply) => {
    const body = request.body as { hold?: boolean; fail?: boolean };
    if (body.hold === true) {
      started.open();
      await hold.wait;
    }
    if (body.fail === true) throw new Error('handler failed');
    return reply.code(201).send({ ok: true });
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  return {
    url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`,
    idempotency,
    hold,
    started,
    close: async () => {
      app.server.closeAllConnections();
      await app.close();
    },
  };
}

const post = (url: string, key: string | undefined, body: string) =>
  fetch(`${url}/charges`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === undefined ? {} : { 'idempotency-key': key }),
    },
    body,
  });

async function expectProblem(response: globalThis.Response, status: number, code: string) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  expect(await response.json()).toMatchObject({ status, code });
}

describe.each([
  ['Express', expressApp],
  ['Fastify', fastifyApp],
] as const)('%s with an error handler of its own', (_name, start) => {
  it('what the handler throws goes to the app; every refusal of the library stays problem+json', async () => {
    const app = await start();
    try {
      // The app's handler is live: a thrown error gets its answer.
      const thrown = await post(app.url, randomUUID(), '{"fail":true}');
      expect(thrown.status).toBe(500);
      expect(await thrown.json()).toEqual(APP_ERROR);

      await expectProblem(await post(app.url, undefined, '{}'), 400, 'EO_IDEMPOTENCY_KEY_MISSING');
      await expectProblem(
        await post(app.url, 'k'.repeat(300), '{}'),
        400,
        'EO_IDEMPOTENCY_KEY_INVALID',
      );
      await expectProblem(
        await post(app.url, randomUUID(), JSON.stringify({ pad: 'x'.repeat(100) })),
        413,
        'EO_REQUEST_TOO_LARGE',
      );

      const key = randomUUID();
      expect((await post(app.url, key, '{"n":1}')).status).toBe(201);
      await expectProblem(await post(app.url, key, '{"n":2}'), 422, 'EO_IDEMPOTENCY_KEY_REUSED');

      const held = randomUUID();
      const original = post(app.url, held, '{"hold":true}');
      await app.started.wait;
      await expectProblem(await post(app.url, held, '{"hold":true}'), 409, 'EO_CLAIM_BUSY');
      app.hold.open();
      expect((await original).status).toBe(201);

      await app.idempotency.close();
      await expectProblem(await post(app.url, randomUUID(), '{}'), 503, 'EO_SHUTDOWN');
    } finally {
      app.hold.open();
      await app.close();
      await app.idempotency.close();
    }
  });
});

describe("the framework's own refusals go through the app's error handler", () => {
  it('Express: a body that is not valid JSON', async () => {
    const app = await expressApp();
    try {
      const response = await post(app.url, randomUUID(), '{"not json');
      expect(response.status).toBe(500);
      expect(await response.json()).toEqual(APP_ERROR);
    } finally {
      await app.close();
      await app.idempotency.close();
    }
  });

  it("Fastify: a body over Fastify's bodyLimit", async () => {
    const app = await fastifyApp();
    try {
      const response = await post(app.url, randomUUID(), JSON.stringify({ pad: 'x'.repeat(2000) }));
      expect(response.status).toBe(500);
      expect(await response.json()).toEqual(APP_ERROR);
    } finally {
      await app.close();
      await app.idempotency.close();
    }
  });
});
