/**
 * A Fastify route handler can keep its held reply past the answer: one given up on at
 * `timeoutMs` (it ignores its signal), or a callback-style one (done at its `send`)
 * whose later callback calls on. Whatever it does to that reply's head later (`reply.code`,
 * `reply.header` …) must not reach the real reply: the library answers the rolled-back
 * request itself (503 EO_HANDLER_TIMEOUT), and an async `onSend` hook in the app (a
 * logger, a compressor) leaves a window between that answer and the head written on
 * the wire. A 201 there would tell the client a rolled-back charge was made; a 400
 * there, that a committed one failed.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import Fastify, { type FastifyInstance } from 'fastify';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { CHARGE, completionFixture, observe } from './completion-support.js';

const fixture = completionFixture('http_fastify_late_head');

/** An async onSend hook, as Fastify's docs write them, held until `released`. */
function holdingOnSend(fastify: FastifyInstance, released: Promise<void>): Promise<void> {
  let entered!: () => void;
  const sending = new Promise<void>((resolve) => (entered = resolve));
  fastify.addHook('onSend', async (_request, _reply, payload) => {
    entered();
    await released;
    return payload;
  });
  return sending;
}

async function listen(fastify: FastifyInstance): Promise<string> {
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  const address = fastify.server.address();
  if (address === null || typeof address === 'string') throw new Error('not on TCP');
  return `http://127.0.0.1:${address.port}/charges`;
}

describe('Fastify: the head of a reply the handler keeps after the answer', () => {
  it('reply.code(201).header() after the timeout, during an async onSend: the 503 goes out as is', async () => {
    let acted!: () => void;
    const handlerActed = new Promise<void>((resolve) => (acted = resolve));
    const fastify = Fastify();
    fixture.later(() => fastify.close());
    await fastify.register(idempotencyPlugin, {
      idempotency: fixture.endpoint({ handlerTimeoutMs: 300 }),
    });
    const sending = holdingOnSend(fastify, handlerActed);
    fastify.post('/charges', async (request, reply) => {
      const { tx, key } = request.idempotency!;
      await tx.query(CHARGE, [key, 'cus_ok', 'slow']);
      // Past timeoutMs (a downstream call that ignores ctx.signal): the library answers.
      await sending;
      reply.code(201).header('location', '/charges/1').type('text/plain');
      acted();
      return { charged: true };
    });
    const url = await listen(fastify);
    const key = randomUUID();
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: '{}',
    });
    const text = await response.text();
    // Nothing was charged: the transaction rolled back at the timeout.
    expect(await fixture.charges(key)).toBe(0);
    expect({
      status: response.status,
      location: response.headers.get('location'),
      type: response.headers.get('content-type'),
      text,
    }).toEqual({
      status: 503,
      location: null,
      type: 'application/problem+json',
      text: expect.stringContaining('EO_HANDLER_TIMEOUT') as unknown as string,
    });
  });

  it('a callback-style handler’s reply.code(400) after its send, during an async onSend: the committed 201 goes out', async () => {
    let acted!: () => void;
    const handlerActed = new Promise<void>((resolve) => (acted = resolve));
    const fastify = Fastify();
    fixture.later(() => fastify.close());
    await fastify.register(idempotencyPlugin, { idempotency: fixture.endpoint() });
    const sending = holdingOnSend(fastify, handlerActed);
    fastify.post('/charges', (request, reply) => {
      const { tx, key } = request.idempotency!;
      // Callback style: no promise, done at its send; a later callback calls on.
      void tx.query(CHARGE, [key, 'cus_ok', 'charge']).then(() => {
        reply.code(201).send({ charged: key });
        void sending.then(() => {
          reply.code(400).header('x-late', 'yes');
          acted();
        });
      });
    });
    const url = await listen(fastify);
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(await fixture.charges(key)).toBe(1);
    expect({ status: first.status, late: first.headers['x-late'] }).toEqual({
      status: 201,
      late: undefined,
    });
    const replay = await observe(url, key, {}, fixture.committed);
    expect(replay.status).toBe(201);
  });
});
