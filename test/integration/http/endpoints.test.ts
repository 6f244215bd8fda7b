import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { idempotentFetch } from 'effectively-once/client';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { waitFor } from '../../helpers/wait-for.js';
import { answer, arrivals, gate, paymentFixture, post, stable } from './support.js';

const fixture = paymentFixture('http_endpoints');
const FAST = { backoff: { initialMs: 5, maxMs: 50 } } as const;

describe.each(FRAMEWORKS)('%s: Idempotency-Key endpoints against a real server', (framework) => {
  it('50 concurrent identical requests: one effect, every answer the same response', async () => {
    const hold = gate();
    const seen = arrivals();
    const server = await fixture.start({
      framework,
      idempotency: { telemetry: seen.telemetry },
      hooks: { beforeEffect: () => hold.wait },
    });
    const key = randomUUID();
    const body = { customerId: 'cus_1', amountCents: 1999 };
    const all = Promise.all(
      Array.from({ length: 50 }, () => post(`${server.url}/charges`, key, body)),
    );
    // Released once all 50 are in: 49 wait on the running original.
    await waitFor(() => seen.count() === 50, { what: 'all 50 requests at the claim' });
    hold.open();
    const answers = await all;

    expect(await fixture.effects(key)).toBe(1);
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([201]));
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
    expect(new Set(answers.map((a) => a.headers.location)).size).toBe(1);
    const originals = answers.filter((a) => a.headers['idempotent-replayed'] === undefined);
    expect(originals).toHaveLength(1);
    const replays = answers.filter((a) => a.headers['idempotent-replayed'] === 'true');
    expect(replays).toHaveLength(49);
    // Stored: status, body, allowlisted headers. Not stored: the cookie, the run counter.
    for (const replay of replays) {
      expect(replay.headers['content-type']).toBe(originals[0]?.headers['content-type']);
      expect(replay.headers['set-cookie']).toBeUndefined();
      expect(replay.headers['x-run']).toBeUndefined();
    }
    expect(originals[0]?.headers['set-cookie']).toMatch(/^session=/);
    expect(JSON.parse(originals[0]?.body ?? '{}')).toMatchObject({ key, amountCents: 1999 });
    expect(server.idempotency.stats()).toMatchObject({ executed: 1, replayed: 49, busy: 0 });
  });

  it("concurrent: 'reject': the others get 409 with Retry-After while the original runs", async () => {
    const hold = gate();
    const server = await fixture.start({
      framework,
      idempotency: { concurrent: 'reject', retryAfterSeconds: 2 },
      hooks: { beforeEffect: () => hold.wait },
    });
    const key = randomUUID();
    const settled: Array<Promise<unknown>> = [];
    const answers = Array.from({ length: 50 }, () => {
      const p = post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 1 });
      settled.push(p);
      return p;
    });
    // The original blocks until 49 answers are in: all of them met a running original.
    let done = 0;
    await new Promise<void>((resolve) => {
      for (const p of settled)
        void p.then(() => {
          if (++done === 49) resolve();
        });
    });
    hold.open();
    const all = await Promise.all(answers);
    expect(all.filter((a) => a.status === 201)).toHaveLength(1);
    const busy = all.filter((a) => a.status === 409);
    expect(busy).toHaveLength(49);
    for (const a of busy) {
      expect(a.headers['retry-after']).toBe('2');
      expect(a.headers['content-type']).toBe('application/problem+json');
      expect(JSON.parse(a.body)).toMatchObject({ status: 409, code: 'EO_CLAIM_BUSY' });
    }
    expect(await fixture.effects(key)).toBe(1);
    // Once the original committed, the same request replays.
    const again = await post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 1 });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
  });

  it('waits at most lockTimeoutMs for a running original, then 409 + Retry-After; never a 5xx', async () => {
    const hold = gate();
    const server = await fixture.start({
      framework,
      idempotency: { lockTimeoutMs: 200 },
      hooks: { beforeEffect: () => hold.wait },
    });
    const key = randomUUID();
    const body = { customerId: 'c', amountCents: 5 };
    const original = post(`${server.url}/charges`, key, body);
    await new Promise((r) => setTimeout(r, 100)); // let the original claim first
    const retry = await post(`${server.url}/charges`, key, body);
    expect(retry.status).toBe(409);
    expect(retry.headers['retry-after']).toBe('1');
    hold.open();
    expect((await original).status).toBe(201);
    const later = await post(`${server.url}/charges`, key, body);
    expect(later).toMatchObject({ status: 201, headers: { 'idempotent-replayed': 'true' } });
    expect(later.body).toBe((await original).body);
    expect(await fixture.effects(key)).toBe(1);
  });

  it('the same key with another body is 422; on another endpoint too; nothing runs', async () => {
    const server = await fixture.start({ framework });
    const key = randomUUID();
    const first = await post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 100 });
    expect(first.status).toBe(201);
    const other = await post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 101 });
    expect(other.status).toBe(422);
    expect(other.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(other.body)).toMatchObject({
      status: 422,
      code: 'EO_IDEMPOTENCY_KEY_REUSED',
      type: 'urn:effectively-once:problem:key-reused',
    });
    const elsewhere = await post(`${server.url}/big?bytes=10`, key, {
      customerId: 'c',
      amountCents: 100,
    });
    expect(elsewhere.status).toBe(422);
    expect(JSON.parse(elsewhere.body)).toMatchObject({
      type: 'urn:effectively-once:problem:key-reused-on-another-endpoint',
    });
    expect(await fixture.effects(key)).toBe(1);
    expect(server.idempotency.stats().mismatched).toBe(2);
  });

  it("scopes keys by tenant: tenant B's key never replays tenant A's response", async () => {
    const server = await fixture.start({ framework });
    const key = randomUUID();
    const body = { customerId: 'c', amountCents: 7 };
    const a = await post(`${server.url}/charges`, key, body, { 'x-tenant': 'tenant-a' });
    const b = await post(`${server.url}/charges`, key, body, { 'x-tenant': 'tenant-b' });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers['idempotent-replayed']).toBeUndefined();
    expect(JSON.parse(a.body)).toMatchObject({ tenant: 'tenant-a' });
    expect(JSON.parse(b.body)).toMatchObject({ tenant: 'tenant-b' });
    expect(await fixture.effects(key)).toBe(2);
    const aAgain = await post(`${server.url}/charges`, key, body, { 'x-tenant': 'tenant-a' });
    expect(aAgain.body).toBe(a.body);
    expect(aAgain.headers['idempotent-replayed']).toBe('true');
  });

  it.each(['throw', 503] as const)(
    'a handler that fails (%s) rolls back; the retry (idempotentFetch) applies once',
    async (failure) => {
      let runs = 0;
      const server = await fixture.start({
        framework,
        hooks: { fail: () => (++runs === 1 ? failure : undefined) },
      });
      const key = randomUUID();
      const seen: number[] = [];
      const result = await idempotentFetch(
        `${server.url}/charges`,
        { method: 'POST' },
        {
          key,
          json: { customerId: 'c', amountCents: 9 },
          ...FAST,
          onRetry: (e) => seen.push(e.status ?? 0),
        },
      );
      expect(seen).toEqual([failure === 'throw' ? 500 : 503]);
      expect(result.response.status).toBe(201);
      expect(result.attempts).toBe(2);
      expect(result.replayed).toBe(false);
      expect(await fixture.effects(key)).toBe(1);
    },
  );

  it('a thrown handler error is a problem+json 500 that names no internals', async () => {
    const server = await fixture.start({ framework, hooks: { fail: () => 'throw' } });
    const failed = await post(`${server.url}/charges`, randomUUID(), {
      customerId: 'c',
      amountCents: 1,
    });
    expect(failed.status).toBe(500);
    if (framework === 'hono') {
      // The core's own answer; adapters hand the error to the framework's error handling.
      expect(failed.headers['content-type']).toBe('application/problem+json');
      expect(failed.body).not.toContain('charge failed');
    }
  });

  it('missing or malformed keys are 400 problem+json; the quoted form is the same key', async () => {
    const server = await fixture.start({ framework });
    const body = { customerId: 'c', amountCents: 3 };
    const missing = await post(`${server.url}/charges`, undefined, body);
    expect(missing.status).toBe(400);
    expect(missing.headers['content-type']).toBe('application/problem+json');
    expect(JSON.parse(missing.body)).toMatchObject({ code: 'EO_IDEMPOTENCY_KEY_MISSING' });
    for (const bad of ['x'.repeat(256), '"unterminated', '""']) {
      const malformed = await post(`${server.url}/charges`, bad, body);
      expect(malformed.status).toBe(400);
      expect(JSON.parse(malformed.body)).toMatchObject({ code: 'EO_IDEMPOTENCY_KEY_INVALID' });
    }
    const key = randomUUID();
    const raw = await post(`${server.url}/charges`, key, body);
    const quoted = await post(`${server.url}/charges`, `"${key}"`, body);
    expect(quoted).toMatchObject({ status: 201, headers: { 'idempotent-replayed': 'true' } });
    expect(quoted.body).toBe(raw.body);
    expect(await fixture.effects(key)).toBe(1);
  });

  it('a response over maxBodyBytes is sent whole once; its replay has no body and says so', async () => {
    const server = await fixture.start({ framework, idempotency: { maxBodyBytes: 1000 } });
    const key = randomUUID();
    const first = await post(`${server.url}/big?bytes=5000`, key, {});
    expect(first.status).toBe(200);
    expect(first.body).toHaveLength(5000);
    const replay = await post(`${server.url}/big?bytes=5000`, key, {});
    expect(stable(replay)).toMatchObject({
      status: 200,
      body: '',
      headers: {
        'idempotent-replayed': 'true',
        'idempotent-body-omitted': 'too-large',
        location: '/big/1',
      },
    });
    // The stored Content-Type described bytes the replay does not have (a server may
    // still add its default one).
    expect(first.headers['content-type']).toMatch(/^text\/plain/);
    expect(replay.headers['content-type']).not.toBe(first.headers['content-type']);
    expect(await fixture.effects(key)).toBe(1);
    // Within the bound, the body is kept.
    const small = randomUUID();
    const kept = await post(`${server.url}/big?bytes=1000`, small, {});
    const keptReplay = await post(`${server.url}/big?bytes=1000`, small, {});
    expect(keptReplay.body).toBe(kept.body);
    expect(keptReplay.headers['idempotent-body-omitted']).toBeUndefined();
  });

  it('a streamed response is sent as it comes and never stored; its replay says so', async () => {
    const server = await fixture.start({ framework });
    const key = randomUUID();
    const first = await post(`${server.url}/big?bytes=20000&stream=1`, key, {});
    expect(first.body).toHaveLength(20000);
    const replay = await post(`${server.url}/big?bytes=20000&stream=1`, key, {});
    expect(replay).toMatchObject({
      status: 200,
      body: '',
      headers: { 'idempotent-replayed': 'true', 'idempotent-body-omitted': 'stream' },
    });
    expect(await fixture.effects(key)).toBe(1);
  });

  it('a replay is byte-identical, through idempotentFetch too', async () => {
    const server = await fixture.start({ framework });
    const key = randomUUID();
    const json = { customerId: 'cus_9', amountCents: 4200 };
    const first = await idempotentFetch(`${server.url}/charges`, { method: 'POST' }, { key, json });
    const again = await idempotentFetch(`${server.url}/charges`, { method: 'POST' }, { key, json });
    expect(first.replayed).toBe(false);
    expect(again.replayed).toBe(true);
    const [a, b] = [await answer(first.response), await answer(again.response)];
    expect(b.body).toBe(a.body);
    expect(b.status).toBe(a.status);
    expect(b.headers.location).toBe(a.headers.location);
  });
});
