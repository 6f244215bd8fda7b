/**
 * Fastify's own hooks on an idempotent route, written as Fastify's docs show them: a
 * preSerialization hook reshapes the payload, an onSend hook edits the serialized
 * string. The answer stored with the effect, the first answer and every replay are what
 * the same route sends without the plugin, against a real Fastify 5 server and Postgres.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import Fastify, { type FastifyInstance } from 'fastify';
import type { IdempotencyContext } from 'effectively-once/http';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { CHARGE, completionFixture, observe } from './completion-support.js';

const fixture = completionFixture('http_fastify_hooks');

/** An app whose hooks `setup` adds, the plugin, and POST /charges charging `cus_ok`. */
async function chargesApp(setup: (fastify: FastifyInstance) => void): Promise<string> {
  const fastify = Fastify();
  setup(fastify);
  await fastify.register(idempotencyPlugin, { idempotency: fixture.endpoint() });
  fastify.post('/charges', async (request, reply) => {
    const { tx, key } = context(request.idempotency);
    await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
    return reply.code(201).send({ charged: key, card: '4242424242424242' });
  });
  return listen(fastify);
}

/** Listens on loopback (closed after the test); the URL of its POST /charges. */
async function listen(fastify: FastifyInstance): Promise<string> {
  fixture.later(() => fastify.close());
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  const address = fastify.server.address();
  if (address === null || typeof address === 'string') throw new Error('not on TCP');
  return `http://127.0.0.1:${address.port}/charges`;
}

function context(ctx: IdempotencyContext | null): IdempotencyContext {
  if (ctx === null) throw new Error('not an idempotent route');
  return ctx;
}

describe('Fastify hooks on an idempotent route', () => {
  it("onSend gets the serialized string, as in Fastify's docs: answer and replay edited alike", async () => {
    const url = await chargesApp((fastify) =>
      // Fastify's docs' onSend example: a serialized JSON payload is a string.
      fastify.addHook('onSend', (_request, _reply, payload, done) => {
        const text = payload as string;
        done(null, text.replace('4242424242424242', '************4242'));
      }),
    );
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first).toMatchObject({ status: 201, committedAtHead: true });
    expect(JSON.parse(first.body.toString())).toEqual({ charged: key, card: '************4242' });
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(first.body)).toBe(true);
    expect(await fixture.charges(key)).toBe(1);
  });

  it('onSend gets a pre-serialized JSON string as a string too, its type given a charset', async () => {
    const fastify = Fastify();
    fastify.addHook('onSend', (_request, _reply, payload, done) => {
      done(null, (payload as string).replace('4242424242424242', '************4242'));
    });
    await fastify.register(idempotencyPlugin, { idempotency: fixture.endpoint() });
    fastify.post('/charges', async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      // A payload serialized by the handler itself, sent with its JSON type.
      return reply
        .code(201)
        .type('application/json')
        .send(JSON.stringify({ charged: key, card: '4242424242424242' }));
    });
    const url = await listen(fastify);
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first).toMatchObject({ status: 201, committedAtHead: true });
    // What Fastify itself sends for a string with a JSON type.
    expect(first.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(first.body.toString())).toEqual({ charged: key, card: '************4242' });
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay).toMatchObject({ status: 201 });
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(first.body)).toBe(true);
  });

  it('preSerialization reshapes the payload: the stored answer is the reshaped one', async () => {
    const url = await chargesApp((fastify) => {
      // Both of Fastify's hook styles: async, and the callback one.
      fastify.addHook('preSerialization', async (_request, reply, payload) => {
        reply.header('x-envelope', 'v1');
        return { data: payload };
      });
      fastify.addHook('preSerialization', (_request, _reply, payload, done) => {
        const { data } = payload as { data: Record<string, unknown> };
        done(null, { data: { ...data, card: undefined } });
      });
    });
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first).toMatchObject({ status: 201, committedAtHead: true });
    expect(first.headers['x-envelope']).toBe('v1');
    expect(JSON.parse(first.body.toString())).toEqual({ data: { charged: key } });
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(first.body)).toBe(true);
    expect(await fixture.charges(key)).toBe(1);
  });

  it('a preSerialization hook that fails rolls the effect back; the error handler answers', async () => {
    let fail = true;
    const url = await chargesApp((fastify) =>
      fastify.addHook('preSerialization', async (_request, _reply, payload) => {
        if (fail) throw Object.assign(new Error('envelope service down'), { statusCode: 502 });
        return payload;
      }),
    );
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(502);
    expect(await fixture.charges(key)).toBe(0);
    fail = false;
    const retry = await observe(url, key, {}, fixture.committed);
    expect(retry).toMatchObject({ status: 201, committedAtHead: true });
    expect(await fixture.charges(key)).toBe(1);
  });
});

describe('Fastify: a route that answers with a web Response (Fastify 5 sends one as it is)', () => {
  it('its status, headers and body are the answer stored and replayed', async () => {
    const fastify = Fastify();
    await fastify.register(idempotencyPlugin, { idempotency: fixture.endpoint() });
    fastify.post('/charges', async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      reply.header('x-request-id', 'r1');
      return new Response(JSON.stringify({ charged: key }), {
        status: 201,
        headers: { 'content-type': 'application/json', location: `/charges/${key}` },
      });
    });
    const url = await listen(fastify);
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first).toMatchObject({ status: 201, committedAtHead: true });
    expect(first.headers).toMatchObject({
      location: `/charges/${key}`,
      'x-request-id': 'r1',
      'content-type': 'application/json',
    });
    expect(JSON.parse(first.body.toString())).toEqual({ charged: key });
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay).toMatchObject({ status: 201 });
    expect(replay.headers).toMatchObject({
      'idempotent-replayed': 'true',
      location: `/charges/${key}`,
    });
    expect(replay.body.equals(first.body)).toBe(true);
    expect(await fixture.charges(key)).toBe(1);
  });
});
