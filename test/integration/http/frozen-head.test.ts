/**
 * The answer a handler gave is the one stored: status and headers are frozen at the
 * moment the framework alone would have sent them (Express: the first `writeHead`,
 * `write`, `flushHeaders` or `end`; Fastify: `reply.send`), and the framework's own
 * errors for a late call (`ERR_HTTP_HEADERS_SENT`) are raised where it raises them.
 * Plain Express 5 and plain Fastify 5 were probed for each case first: a late
 * `res.status(400)` / `reply.code(400)` changes nothing on the wire, a late `res.set`
 * or a second `res.json()` throws ERR_HTTP_HEADERS_SENT, a second `reply.send` is
 * ignored.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import { describe, expect, it } from '@jest/globals';
import express, { type NextFunction, type Request, type Response } from 'express';
import Fastify, { type RouteHandlerMethod } from 'fastify';
import type { Idempotency, IdempotencyContext } from 'effectively-once/http';
import { idempotentExpress, type ExpressIdempotentHandler } from 'effectively-once/http/express';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { CHARGE, completionFixture, observe } from './completion-support.js';

const fixture = completionFixture('http_frozen_head');

async function serveExpress(
  idempotency: Idempotency,
  handler: ExpressIdempotentHandler,
  caught: unknown[] = [],
): Promise<string> {
  const app = express();
  app.post('/r', idempotentExpress(idempotency, handler));
  app.use((err: Error, _req: Request, res: Response, _next: NextFunction) => {
    caught.push(err);
    res.status(500).json({ caught: err.message });
  });
  return `${await fixture.listen(http.createServer(app))}/r`;
}

function context(ctx: IdempotencyContext | null): IdempotencyContext {
  if (ctx === null) throw new Error('not an idempotent route');
  return ctx;
}

describe('Express: the head is frozen at the answer', () => {
  it('res.status(400) in a catch after res.status(201).json(): 201 is sent, stored and replayed', async () => {
    const seen: unknown[] = [];
    const url = await serveExpress(fixture.endpoint(), async (_req, res, { tx, key }) => {
      try {
        await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
        res.status(201).json({ charged: key });
        throw new Error('the audit log said no after the answer');
      } catch {
        res.status(400);
        seen.push(res.headersSent);
      }
    });
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(201);
    expect(JSON.parse(first.body.toString())).toEqual({ charged: key });
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    // As in plain Express: the answer counts as sent.
    expect(seen).toEqual([true]);
    expect(await fixture.charges(key)).toBe(1);
  });

  it('a header set after the answer throws ERR_HTTP_HEADERS_SENT, as in plain Express, and is not stored', async () => {
    const seen: unknown[] = [];
    const url = await serveExpress(fixture.endpoint(), async (_req, res, { tx, key }) => {
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      res.status(201).json({ charged: key });
      try {
        res.set('x-late', '1');
        seen.push('set');
      } catch (error) {
        seen.push((error as { code?: unknown }).code);
      }
    });
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(201);
    expect(first.headers['x-late']).toBeUndefined();
    expect(seen).toEqual(['ERR_HTTP_HEADERS_SENT']);
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.headers['x-late']).toBeUndefined();
  });

  it('a second res.json() throws ERR_HTTP_HEADERS_SENT: the effect rolls back, the error reaches next', async () => {
    const caught: unknown[] = [];
    const url = await serveExpress(
      fixture.endpoint(),
      async (_req, res, { tx, key }) => {
        await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
        res.status(201).json({ charged: key });
        res.status(400).json({ again: true });
      },
      caught,
    );
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(caught).toEqual([expect.objectContaining({ code: 'ERR_HTTP_HEADERS_SENT' })]);
    expect(first.status).toBe(500);
    expect(await fixture.charges(key)).toBe(0);
  });

  it('a callback-style handler (done at its answer): a second res.json() in the same callback throws ERR_HTTP_HEADERS_SENT', async () => {
    const seen: unknown[] = [];
    const url = await serveExpress(fixture.endpoint(), (_req, res, { tx, key }) => {
      void tx.query(CHARGE, [key, 'cus_ok', 'charge']).then(() => {
        res.status(201).json({ charged: key });
        try {
          res.status(400).json({ again: true });
          seen.push('sent twice');
        } catch (error) {
          seen.push((error as { code?: unknown }).code, res.headersSent);
        }
      });
    });
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(201);
    expect(JSON.parse(first.body.toString())).toEqual({ charged: key });
    expect(seen).toEqual(['ERR_HTTP_HEADERS_SENT', true]);
    expect(await fixture.charges(key)).toBe(1);
  });

  it('the head is frozen at res.write(): a later res.setHeader throws, the status stays', async () => {
    const seen: unknown[] = [];
    const url = await serveExpress(fixture.endpoint(), async (_req, res, { tx, key }) => {
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      res.status(201).type('text/plain');
      res.write('a');
      try {
        res.setHeader('x-late', '1');
      } catch (error) {
        seen.push((error as { code?: unknown }).code);
      }
      res.statusCode = 400;
      res.end('b');
    });
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(201);
    expect(first.body.toString()).toBe('ab');
    expect(first.headers['x-late']).toBeUndefined();
    expect(seen).toEqual(['ERR_HTTP_HEADERS_SENT']);
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.status).toBe(201);
  });
});

describe('Fastify: the head is frozen at reply.send', () => {
  async function serveFastify(
    idempotency: Idempotency,
    route: RouteHandlerMethod,
  ): Promise<string> {
    const fastify = Fastify();
    await fastify.register(idempotencyPlugin, { idempotency });
    fastify.post('/r', route);
    fixture.later(() => fastify.close());
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    const address = fastify.server.address();
    if (address === null || typeof address === 'string') throw new Error('not on TCP');
    return `http://127.0.0.1:${address.port}/r`;
  }

  it('reply.code(400) in a catch after reply.code(201).send(): 201 is sent, stored and replayed', async () => {
    const seen: unknown[] = [];
    const url = await serveFastify(fixture.endpoint(), async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      try {
        await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
        reply.code(201).send({ charged: key });
        throw new Error('the audit log said no after the answer');
      } catch {
        reply.code(400).header('x-late', '1');
        seen.push(reply.sent);
      }
      return reply;
    });
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(201);
    expect(first.headers['x-late']).toBeUndefined();
    expect(JSON.parse(first.body.toString())).toEqual({ charged: key });
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.headers['x-late']).toBeUndefined();
    // As in plain Fastify: the reply counts as sent.
    expect(seen).toEqual([true]);
    expect(await fixture.charges(key)).toBe(1);
  });

  it('a second reply.code(400).send() is ignored, as in plain Fastify: the first answer is stored', async () => {
    const url = await serveFastify(fixture.endpoint(), async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      reply.code(201).send({ charged: key });
      reply.code(400).send({ again: true });
      return reply;
    });
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(201);
    expect(JSON.parse(first.body.toString())).toEqual({ charged: key });
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.status).toBe(201);
    expect(await fixture.charges(key)).toBe(1);
  });
});
