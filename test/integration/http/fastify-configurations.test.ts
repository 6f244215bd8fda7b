/**
 * Two idempotency configurations in one Fastify app, through Fastify's own means: the
 * plugin registered again inside an encapsulated scope (its routes take the nearest
 * registration), and a route's `config.idempotency.use`.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { idempotencyPlugin } from 'effectively-once/http/fastify';
import { gate } from './support.js';
import { CHARGE, completionFixture, observe } from './completion-support.js';

const fixture = completionFixture('http_fastify_configs');

describe('Fastify: two configurations in one app', () => {
  it("routes take the nearest registration or their own `use`: 'reject' answers 409 at once, 'wait' replays", async () => {
    const waiting = fixture.endpoint({ concurrent: 'wait' });
    const rejecting = fixture.endpoint({ concurrent: 'reject' });
    // Both families share the key table: created before the first requests, whose
    // concurrent first migrations would otherwise race on its DDL (a separate defect:
    // the second CREATE INDEX IF NOT EXISTS queues behind the first family's open claim).
    await waiting.migrate();
    await rejecting.migrate();
    const hold = gate();
    const arrived: string[] = [];
    let runs = 0;
    const handler = async (request: FastifyRequest, reply: FastifyReply) => {
      const ctx = request.idempotency;
      if (ctx === null) throw new Error('not idempotent');
      runs++;
      arrived.push(request.url);
      await ctx.tx.query(CHARGE, [ctx.key, 'cus_ok', 'charge']);
      await hold.wait;
      return reply.code(201).send({ charged: ctx.key });
    };

    const app = Fastify();
    fixture.later(() => app.close());
    await app.register(idempotencyPlugin, { idempotency: waiting });
    await app.register(async (strict) => {
      await strict.register(idempotencyPlugin, { idempotency: rejecting });
      strict.post('/strict', handler);
    });
    app.post('/lenient', handler);
    app.post('/per-route', { config: { idempotency: { use: rejecting } } }, handler);
    app.post('/plain', { config: { idempotency: false } }, async (request) => ({
      idempotent: request.idempotency !== null,
    }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('not on TCP');
    const base = `http://127.0.0.1:${address.port}`;

    const keys = { strict: randomUUID(), lenient: randomUUID(), 'per-route': randomUUID() };
    const originals = Object.entries(keys).map(([route, key]) =>
      observe(`${base}/${route}`, key, {}, fixture.committed),
    );
    while (arrived.length < 3) await new Promise((resolve) => setTimeout(resolve, 10));
    const strictRetry = await observe(`${base}/strict`, keys.strict, {}, fixture.committed);
    const perRouteRetry = await observe(
      `${base}/per-route`,
      keys['per-route'],
      {},
      fixture.committed,
    );
    expect(strictRetry.status).toBe(409);
    expect(perRouteRetry.status).toBe(409);
    const lenientRetry = observe(`${base}/lenient`, keys.lenient, {}, fixture.committed);
    hold.open();
    for (const original of await Promise.all(originals)) expect(original.status).toBe(201);
    const replay = await lenientRetry;
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    // Each route ran once, under one claim (no route wrapped twice).
    expect(runs).toBe(3);
    for (const key of Object.values(keys)) expect(await fixture.charges(key)).toBe(1);
    const plain = await observe(`${base}/plain`, randomUUID(), {}, fixture.committed);
    expect(JSON.parse(plain.body.toString())).toEqual({ idempotent: false });
  });

  it('sibling scopes, each with its own registration, and none at the root', async () => {
    const app = Fastify();
    fixture.later(() => app.close());
    for (const [prefix, idempotency] of [
      ['/a', fixture.endpoint({ scope: 'tenant-a' })],
      ['/b', fixture.endpoint({ scope: 'tenant-b' })],
    ] as const)
      await app.register(
        async (scope) => {
          await scope.register(idempotencyPlugin, { idempotency });
          scope.post('/charges', async (request) => ({ scope: request.idempotency?.scope }));
        },
        { prefix },
      );
    app.post('/outside', async (request) => ({ idempotent: request.idempotency != null }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('not on TCP');
    const base = `http://127.0.0.1:${address.port}`;
    const key = randomUUID();
    const a = await observe(`${base}/a/charges`, key, {}, fixture.committed);
    const b = await observe(`${base}/b/charges`, key, {}, fixture.committed);
    expect(JSON.parse(a.body.toString())).toEqual({ scope: 'tenant-a' });
    expect(JSON.parse(b.body.toString())).toEqual({ scope: 'tenant-b' });
    const outside = await observe(`${base}/outside`, randomUUID(), {}, fixture.committed);
    expect(JSON.parse(outside.body.toString())).toEqual({ idempotent: false });
  });

  it("a route opted in outside createIdempotency's methods: a key is optional, and without one nothing is kept", async () => {
    const app = Fastify();
    fixture.later(() => app.close());
    await app.register(idempotencyPlugin, { idempotency: fixture.endpoint() });
    let runs = 0;
    app.put('/profile', { config: { idempotency: {} } }, async (request) => {
      runs++;
      return { idempotent: request.idempotency !== null };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const address = app.server.address();
    if (address === null || typeof address === 'string') throw new Error('not on TCP');
    const url = `http://127.0.0.1:${address.port}/profile`;
    const put = (key?: string) =>
      fetch(url, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', ...(key ? { 'idempotency-key': key } : {}) },
        body: '{}',
      });
    for (let i = 0; i < 2; i++) {
      const unkeyed = await put();
      expect(unkeyed.status).toBe(200);
      expect(unkeyed.headers.get('idempotent-replayed')).toBeNull();
      expect(await unkeyed.json()).toEqual({ idempotent: true });
    }
    const key = randomUUID();
    await put(key);
    const replay = await put(key);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(runs).toBe(3);
  });
});
