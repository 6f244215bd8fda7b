/**
 * A Fastify route handler given up on at `timeoutMs` (one that ignores its signal)
 * keeps its held reply. Whatever it does to that reply's head later (`reply.code`,
 * `reply.header` …) must not reach the real reply: the library answers the rolled-back
 * request itself (503 EO_HANDLER_TIMEOUT), and an async `onSend` hook in the app (a
 * logger, a compressor) leaves a window between that answer and the head written on
 * the wire. A 201 there would tell the client a rolled-back charge was made.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import Fastify from 'fastify';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { CHARGE, completionFixture } from './completion-support.js';

const fixture = completionFixture('http_fastify_abandoned_head');

describe('Fastify: the head of an abandoned handler’s reply', () => {
  it('reply.code(201).header() after the timeout, during an async onSend: the 503 goes out as is', async () => {
    let onSendEntered!: () => void;
    const sending = new Promise<void>((resolve) => (onSendEntered = resolve));
    let acted!: () => void;
    const handlerActed = new Promise<void>((resolve) => (acted = resolve));
    const fastify = Fastify();
    fixture.later(() => fastify.close());
    await fastify.register(idempotencyPlugin, {
      idempotency: fixture.endpoint({ timeoutMs: 300 }),
    });
    // An async onSend hook, as Fastify's docs write them: held until the handler acted.
    fastify.addHook('onSend', async (_request, _reply, payload) => {
      onSendEntered();
      await handlerActed;
      return payload;
    });
    fastify.post('/charges', async (request, reply) => {
      const { tx, key } = request.idempotency!;
      await tx.query(CHARGE, [key, 'cus_ok', 'slow']);
      // Past timeoutMs (a downstream call that ignores ctx.signal): the library answers.
      await sending;
      reply.code(201).header('location', '/charges/1').type('text/plain');
      acted();
      return { charged: true };
    });
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    const address = fastify.server.address();
    if (address === null || typeof address === 'string') throw new Error('not on TCP');
    const key = randomUUID();
    const response = await fetch(`http://127.0.0.1:${address.port}/charges`, {
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
});
