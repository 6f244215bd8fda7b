/**
 * Fastify handlers written as Fastify's docs show them (async, `return reply`, a
 * callback-style handler that calls `reply.send` later, stream payloads), against a
 * real Fastify 5 server and Postgres: nothing reaches the client before the verified
 * COMMIT, and the transaction ends at the handler's completion.
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from '@jest/globals';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Idempotency, IdempotencyContext } from 'effectively-once/http';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { CHARGE, completionFixture, expectCutThenReplayed, observe } from './completion-support.js';

const fixture = completionFixture('http_fastify_done');

async function app(idempotency: Idempotency): Promise<FastifyInstance> {
  const fastify = Fastify();
  await fastify.register(idempotencyPlugin, { idempotency });
  fixture.later(() => fastify.close());
  return fastify;
}

async function listen(fastify: FastifyInstance): Promise<string> {
  await fastify.listen({ port: 0, host: '127.0.0.1' });
  const address = fastify.server.address();
  if (address === null || typeof address === 'string') throw new Error('not on TCP');
  return `http://127.0.0.1:${address.port}`;
}

function context(ctx: IdempotencyContext | null): IdempotencyContext {
  if (ctx === null) throw new Error('not an idempotent route');
  return ctx;
}

describe('Fastify: a callback-style handler (reply.send later, not async)', () => {
  it('whose COMMIT fails: the client never sees its 201; the retry charges once', async () => {
    const fastify = await app(fixture.endpoint());
    fastify.post('/charges', function (request, reply) {
      const { tx, key } = context(request.idempotency);
      const { customerId } = request.body as { customerId: string };
      tx.query<{ id: string }>(CHARGE, [key, customerId, 'charge']).then(
        ({ rows }) => reply.code(201).send({ charged: rows[0]?.id }),
        (err: Error) => reply.send(err),
      );
    });
    const url = `${await listen(fastify)}/charges`;
    const key = randomUUID();
    const customer = `cus_${randomUUID()}`;
    const first = await observe(url, key, { customerId: customer }, fixture.committed);
    expect(first.status).toBe(500);
    expect(first.body.toString()).not.toContain('charged');
    expect(await fixture.charges(key)).toBe(0);
    await fixture.addCustomer(customer);
    const retry = await observe(url, key, { customerId: customer }, fixture.committed);
    expect(retry).toMatchObject({ status: 201, committedAtHead: true });
    const replay = await observe(url, key, { customerId: customer }, fixture.committed);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.equals(retry.body)).toBe(true);
    expect(await fixture.charges(key)).toBe(1);
  });

  it('ctx.tx used after its send is refused: nothing commits, the error handler answers', async () => {
    const fastify = await app(fixture.endpoint());
    fastify.post('/charges', function (request, reply) {
      const { tx, key } = context(request.idempotency);
      void tx
        .query(CHARGE, [key, 'cus_ok', 'charge'])
        .then(() => {
          reply.code(201).send({ charged: key });
          return tx.query(CHARGE, [key, 'cus_ok', 'late']);
        })
        .catch(() => undefined);
    });
    const key = randomUUID();
    const answer = await observe(`${await listen(fastify)}/charges`, key, {}, fixture.committed);
    expect(answer.status).toBe(500);
    expect(answer.body.toString()).not.toContain('charged');
    expect(await fixture.charges(key)).toBe(0);
  });

  it('a stream payload whose COMMIT fails never reaches the client, and is destroyed', async () => {
    const fastify = await app(fixture.endpoint());
    let stream: Readable | undefined;
    fastify.post('/export', function (request, reply) {
      const { tx, key } = context(request.idempotency);
      void tx.query(CHARGE, [key, 'cus_missing', 'export']).then(() => {
        stream = Readable.from(['row 1\n', 'row 2\n']);
        reply.type('text/csv').send(stream);
      });
    });
    const key = randomUUID();
    const answer = await observe(`${await listen(fastify)}/export`, key, {}, fixture.committed);
    expect(answer.status).toBe(500);
    expect(answer.body.toString()).not.toContain('row');
    expect(stream?.destroyed).toBe(true);
    expect(await fixture.charges(key)).toBe(0);
  });

  it('a stream payload that fails before COMMIT: rolled back, nothing charged, nothing crashes', async () => {
    const fastify = await app(fixture.endpoint());
    fastify.post('/export', async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      await tx.query(CHARGE, [key, 'cus_ok', 'export']);
      const rows = new Readable({ read() {} });
      setImmediate(() => rows.destroy(new Error('the export source went away')));
      reply.type('text/csv').send(rows);
      await tx.query('SELECT pg_sleep(0.05)');
    });
    const key = randomUUID();
    const answer = await observe(`${await listen(fastify)}/export`, key, {}, fixture.committed);
    expect(answer.status).toBe(500);
    expect(await fixture.charges(key)).toBe(0);
  });

  it('a stream payload that fails after COMMIT: the response is cut, never ended cleanly; the replay says stream', async () => {
    const fastify = await app(fixture.endpoint());
    fastify.post('/export', function (request, reply) {
      const { tx, key } = context(request.idempotency);
      void tx.query(CHARGE, [key, 'cus_ok', 'export']).then(() => {
        let reads = 0;
        // Read only once sent (after COMMIT): a first row, then the source fails.
        const rows = new Readable({
          read() {
            if (++reads === 1) this.push('row 1\n');
            else setTimeout(() => this.destroy(new Error('the export source went away')), 10);
          },
        });
        reply.type('text/csv').send(rows);
      });
    });
    await expectCutThenReplayed(fixture, `${await listen(fastify)}/export`);
  });

  it('abandoned on timeout, its late reply.send sends no second answer and crashes nothing', async () => {
    const fastify = await app(fixture.endpoint({ handlerTimeoutMs: 150 }));
    let late: unknown;
    fastify.post('/slow', function (_request, reply) {
      setTimeout(() => {
        try {
          late = reply.code(201).send({ late: true });
        } catch (error) {
          late = error;
        }
      }, 400);
    });
    fastify.post('/fast', async () => ({ ok: true }));
    const base = await listen(fastify);
    const first = await observe(`${base}/slow`, randomUUID(), {}, fixture.committed);
    expect(first.status).toBe(503);
    await sleep(600);
    expect(late).not.toBeInstanceOf(Error);
    const next = await observe(`${base}/fast`, randomUUID(), {}, fixture.committed);
    expect(next.status).toBe(200);
  });
});

describe('Fastify: what a held reply refuses', () => {
  it('reply.send(error) from a callback rolls back and reaches the error handler', async () => {
    const fastify = await app(fixture.endpoint());
    fastify.setErrorHandler((error, _request, reply) =>
      reply.code(502).send({ caught: (error as Error).message }),
    );
    fastify.post('/charges', function (request, reply) {
      const { tx, key } = context(request.idempotency);
      void tx
        .query(CHARGE, [key, 'cus_ok', 'charge'])
        .then(() => reply.send(new Error('the card network said no')));
    });
    const key = randomUUID();
    const answer = await observe(`${await listen(fastify)}/charges`, key, {}, fixture.committed);
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.body.toString())).toEqual({ caught: 'the card network said no' });
    expect(await fixture.charges(key)).toBe(0);
  });

  it('reply.hijack() throws: the answer must wait for COMMIT', async () => {
    const fastify = await app(fixture.endpoint());
    let refused: unknown;
    fastify.post('/raw', async (_request, reply) => {
      try {
        reply.hijack();
      } catch (error) {
        refused = error;
      }
      return { hijacked: false };
    });
    const answer = await observe(
      `${await listen(fastify)}/raw`,
      randomUUID(),
      {},
      fixture.committed,
    );
    expect(answer.status).toBe(200);
    expect(refused).toMatchObject({ code: 'EO_CONFIGURATION' });
  });

  it('a stream payload is read after the transaction: its ctx.tx query is refused, the response cut', async () => {
    const fastify = await app(fixture.endpoint());
    fastify.post('/export', async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      await tx.query(CHARGE, [key, 'cus_ok', 'export']);
      const rows = Readable.from(
        (async function* () {
          yield 'id\n';
          const { rows: found } = await tx.query<{ id: string }>('SELECT id FROM charges');
          for (const row of found) yield `${row.id}\n`;
        })(),
      );
      return reply.type('text/csv').send(rows);
    });
    const url = `${await listen(fastify)}/export`;
    const key = randomUUID();
    await expect(observe(url, key, {}, fixture.committed)).rejects.toThrow(/aborted|reset|socket/i);
    expect(await fixture.charges(key)).toBe(1);
  });
});

describe('Fastify: async handlers', () => {
  it('`return reply` after reply.send(), `await reply`, and work after the send: all inside the transaction', async () => {
    const fastify = await app(fixture.endpoint());
    fastify.post('/returns-reply', async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      reply.code(201).send({ charged: key });
      return reply;
    });
    fastify.post('/awaits-reply', async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      setTimeout(() => void reply.code(201).send({ charged: key }), 20);
      await reply;
      await tx.query(CHARGE, [key, 'cus_ok', 'after the send']);
    });
    fastify.post('/keeps-working', async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      await reply.code(201).send({ charged: key });
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      await tx.query(CHARGE, [key, 'cus_ok', 'audit']);
    });
    const base = await listen(fastify);
    for (const [route, effects] of [
      ['returns-reply', 1],
      ['awaits-reply', 1],
      ['keeps-working', 2],
    ] as const) {
      const key = randomUUID();
      const answer = await observe(`${base}/${route}`, key, {}, fixture.committed);
      expect({ route, status: answer.status, committedAtHead: answer.committedAtHead }).toEqual({
        route,
        status: 201,
        committedAtHead: true,
      });
      expect(JSON.parse(answer.body.toString())).toEqual({ charged: key });
      expect(await fixture.charges(key)).toBe(effects);
    }
  });

  it('a throw after reply.send(): rolled back, Fastify’s error handler answers, the retry runs again', async () => {
    const fastify = await app(fixture.endpoint());
    let runs = 0;
    fastify.setErrorHandler((error, _request, reply) =>
      reply.code(500).send({ caught: (error as Error).message }),
    );
    fastify.post('/charges', async (request, reply) => {
      const { tx, key } = context(request.idempotency);
      runs++;
      await tx.query(CHARGE, [key, 'cus_ok', 'charge']);
      reply.code(201).send({ charged: key });
      if (runs === 1) throw new Error('the ledger said no after the answer');
      return reply;
    });
    const url = `${await listen(fastify)}/charges`;
    const key = randomUUID();
    const first = await observe(url, key, {}, fixture.committed);
    expect(first.status).toBe(500);
    expect(JSON.parse(first.body.toString())).toEqual({
      caught: 'the ledger said no after the answer',
    });
    expect(await fixture.charges(key)).toBe(0);
    const retry = await observe(url, key, {}, fixture.committed);
    expect(retry.status).toBe(201);
    expect(await fixture.charges(key)).toBe(1);
  });
});
