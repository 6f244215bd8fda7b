/**
 * idempotentFetch against a real node:http server on loopback (an in-memory
 * Idempotency-Key store), with the real global fetch. Behaviour is counted in attempts
 * and server arrivals, never in milliseconds.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import {
  ConfigurationError,
  RetriesExhaustedError,
  idempotentFetch,
  type RetryEvent,
} from 'effectively-once/client';
import { waitFor } from '../../helpers/wait-for.js';
import { FAST, cleanupAfterEach, gate, onCleanup, startProxy, startServer } from './support.js';

cleanupAfterEach();

const sha256 = (bytes: Uint8Array | string): string =>
  createHash('sha256').update(bytes).digest('hex');

describe('the final answer', () => {
  it('a first success: one attempt, one effect, not a replay; the key is a fresh UUID', async () => {
    const server = await startServer();
    const result = await idempotentFetch(
      `${server.url}/charges`,
      { method: 'POST' },
      { json: { amount: 5 } },
    );
    expect(result.response.status).toBe(201);
    expect(result).toMatchObject({ attempts: 1, replayed: false });
    expect(result.key).toMatch(
      /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
    );
    expect(server.arrivals.map((a) => a.key)).toEqual([result.key]);
    expect(server.effects.get(result.key)).toBe(1);
  });

  it("a second call with the caller's key replays: replayed is true, the effect stays single", async () => {
    const server = await startServer();
    const call = () =>
      idempotentFetch(
        `${server.url}/charges`,
        { method: 'POST' },
        { key: 'job-7', json: { a: 1 } },
      );
    const first = await call();
    const second = await call();
    expect([first.replayed, second.replayed]).toEqual([false, true]);
    expect(await second.response.text()).toBe(await first.response.text());
    expect(server.effects.get('job-7')).toBe(1);
  });

  it.each([400, 404, 422])('a %i is returned to the caller, never retried', async (status) => {
    const server = await startServer({
      intercept: () => ({ status, body: JSON.stringify({ status }) }),
    });
    const result = await idempotentFetch(
      `${server.url}/x`,
      { method: 'POST' },
      { json: {}, attempts: 5, ...FAST },
    );
    expect(result.response.status).toBe(status);
    expect(result.attempts).toBe(1);
    expect(server.arrivals).toHaveLength(1);
  });

  it("the same key with another body is the server's 422 mismatch, returned after one attempt", async () => {
    const server = await startServer();
    await idempotentFetch(`${server.url}/c`, { method: 'POST' }, { key: 'k-m', json: { a: 1 } });
    const result = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST' },
      { key: 'k-m', json: { a: 2 }, ...FAST },
    );
    expect(result.response.status).toBe(422);
    expect(result.attempts).toBe(1);
    expect(server.arrivalsFor('k-m').map((a) => a.outcome)).toEqual(['applied', 'mismatch']);
    expect(server.effects.get('k-m')).toBe(1);
  });
});

describe('retries', () => {
  it.each([500, 502, 503, 504, 429])(
    'a %i is retried with the same key and bytes, and the retry applies once',
    async (status) => {
      const server = await startServer({
        intercept: (_a, nth) => (nth === 0 ? { status } : undefined),
      });
      const result = await idempotentFetch(
        `${server.url}/c`,
        { method: 'POST' },
        { key: `k-${status}`, json: { status }, ...FAST },
      );
      expect(result.response.status).toBe(201);
      expect(result).toMatchObject({ attempts: 2, replayed: false });
      const arrivals = server.arrivalsFor(`k-${status}`);
      expect(arrivals.map((a) => a.outcome)).toEqual(['intercepted', 'applied']);
      expect(new Set(arrivals.map((a) => a.bodySha256)).size).toBe(1);
      expect(server.effects.get(`k-${status}`)).toBe(1);
    },
  );

  it('a 408 Request Timeout (the server gave up before the whole request arrived) is retried with the same key', async () => {
    // RFC 9110 §15.5.9: the server did not receive a complete request and closes; the
    // client may repeat it. The key makes a repeat harmless even had it been applied.
    const server = await startServer({
      intercept: (_a, nth) =>
        nth === 0 ? { status: 408, headers: { connection: 'close' } } : undefined,
    });
    const result = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST' },
      { key: 'k-408', json: { status: 408 }, ...FAST },
    );
    expect(result.response.status).toBe(201);
    expect(result).toMatchObject({ attempts: 2, replayed: false });
    expect(server.arrivalsFor('k-408').map((a) => a.outcome)).toEqual(['intercepted', 'applied']);
    expect(server.effects.get('k-408')).toBe(1);
  });

  it('409 + Retry-After while the original runs: waits what the server said, then gets the replay', async () => {
    const original = gate();
    const server = await startServer({
      beforeEffect: () => original.wait,
      inProgressRetryAfter: '1',
    });
    const init = { method: 'POST', headers: { 'idempotency-key': 'k-409' }, body: '{"a":1}' };
    // The original: a plain fetch whose handler is still running.
    const first = fetch(`${server.url}/c`, init);
    await waitFor(() => server.arrivals.length === 1, { what: 'the original to arrive' });

    const retries: RetryEvent[] = [];
    const result = await idempotentFetch(`${server.url}/c`, init, {
      ...FAST,
      onRetry: (event) => {
        retries.push(event);
        original.open(); // the original finishes while the retry waits
      },
    });
    expect(retries).toEqual([
      expect.objectContaining({ attempt: 1, status: 409, delayMs: 1000, fromRetryAfter: true }),
    ]);
    expect(result.response.status).toBe(201);
    expect(result).toMatchObject({ key: 'k-409', attempts: 2, replayed: true });
    expect((await first).status).toBe(201);
    expect(server.arrivalsFor('k-409').map((a) => a.outcome)).toEqual([
      'applied',
      'in-progress',
      'replayed',
    ]);
    expect(server.effects.get('k-409')).toBe(1);
  });

  it('a Retry-After longer than the time left gives up at once (deadline) with the response', async () => {
    const server = await startServer({
      intercept: () => ({ status: 503, headers: { 'retry-after': '120' }, body: 'busy' }),
    });
    const error = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST' },
      { json: {}, attempts: 10, deadlineMs: 30_000, ...FAST },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    const exhausted = error as RetriesExhaustedError;
    expect(exhausted).toMatchObject({ reason: 'deadline', attempts: 1, status: 503 });
    expect(await exhausted.response?.text()).toBe('busy');
    expect(server.arrivals).toHaveLength(1);
  });

  it('stops at `attempts`: a typed error with the key, the count and the last status', async () => {
    const server = await startServer({ intercept: () => ({ status: 503 }) });
    const error = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST' },
      { key: 'k-x', json: { a: 1 }, attempts: 3, ...FAST },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RetriesExhaustedError);
    expect(error).toMatchObject({
      code: 'EO_RETRIES_EXHAUSTED',
      retryable: true,
      reason: 'attempts',
      key: 'k-x',
      attempts: 3,
      status: 503,
    });
    const arrivals = server.arrivalsFor('k-x');
    expect(arrivals).toHaveLength(3);
    expect(new Set(arrivals.map((a) => a.bodySha256))).toEqual(new Set([sha256('{"a":1}')]));
  });

  it('stops at `deadlineMs` between attempts: reason deadline, several attempts made', async () => {
    // Waits of a fixed second (Retry-After) against a 2.5 s deadline: attempts start near
    // 0, 1 and 2 s, and the next wait would cross the deadline. Jittered waits could leave
    // the last attempt a few ms, which the deadline then cuts in flight (another test).
    const server = await startServer({
      intercept: () => ({ status: 500, headers: { 'retry-after': '1' } }),
    });
    const error = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST' },
      { key: 'k-dl', json: {}, attempts: 100, deadlineMs: 2500 },
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'deadline', status: 500 });
    const { attempts } = error as RetriesExhaustedError;
    expect(attempts).toBeGreaterThan(1);
    expect(attempts).toBeLessThan(100);
    expect(server.arrivalsFor('k-dl')).toHaveLength(attempts);
  });

  it('the deadline also ends an attempt in flight', async () => {
    const hung = gate();
    onCleanup(() => hung.open());
    const server = await startServer({ beforeEffect: () => hung.wait });
    const error = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST' },
      { json: {}, deadlineMs: 1000, attemptTimeoutMs: 60_000 },
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'deadline', attempts: 1, status: undefined });
    expect((error as Error).cause).toMatchObject({ name: 'TimeoutError' });
  });

  it("a per-attempt timeout is retried with the same key; the original's effect is replayed", async () => {
    const slow = gate();
    onCleanup(() => slow.open());
    const server = await startServer({
      beforeEffect: () => slow.wait,
      // The retry found the original running: let it finish now.
      intercept: (_a, nth) => {
        if (nth === 1) slow.open();
        return undefined;
      },
    });
    const retries: RetryEvent[] = [];
    const result = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST' },
      { key: 'k-to', json: {}, attemptTimeoutMs: 300, ...FAST, onRetry: (e) => retries.push(e) },
    );
    expect(result.response.status).toBe(201);
    expect(result.replayed).toBe(true);
    expect(retries[0]?.error).toMatchObject({ name: 'TimeoutError' });
    expect(server.effects.get('k-to')).toBe(1);
    expect(server.arrivalsFor('k-to')).toHaveLength(result.attempts);
  });

  it('connection refused is retried; the first attempt reached nobody', async () => {
    const server = await startServer();
    const proxy = await startProxy(server, { down: true });
    const retries: RetryEvent[] = [];
    const result = await idempotentFetch(
      `${proxy.url}/c`,
      { method: 'POST' },
      {
        json: {},
        ...FAST,
        onRetry: (event) => {
          retries.push(event);
          void proxy.up();
        },
      },
    );
    // up() may not have finished listening before the next attempt: count, don't assume.
    expect(result.response.status).toBe(201);
    expect(retries.length).toBe(result.attempts - 1);
    expect(retries[0]?.error).toMatchObject({ cause: { code: 'ECONNREFUSED' } });
    expect(server.arrivals).toHaveLength(1);
  });

  it('connection refused to the end: the error names the network cause', async () => {
    const server = await startServer();
    const proxy = await startProxy(server, { down: true });
    const error = await idempotentFetch(
      `${proxy.url}/c`,
      { method: 'POST' },
      { json: {}, attempts: 3, ...FAST },
    ).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: 'attempts', attempts: 3, status: undefined });
    expect((error as Error).message).toContain('ECONNREFUSED');
    expect((error as Error).cause).toMatchObject({ name: 'TypeError' });
  });
});

describe('abort', () => {
  it('an already aborted signal rejects with its reason; nothing is sent', async () => {
    const server = await startServer();
    const reason = new Error('user cancelled');
    const error = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST', signal: AbortSignal.abort(reason) },
      { json: {} },
    ).catch((e: unknown) => e);
    expect(error).toBe(reason);
    expect(server.arrivals).toHaveLength(0);
  });

  it('an abort during the wait between attempts rejects with the reason; no further attempt', async () => {
    const server = await startServer({
      intercept: () => ({ status: 503, headers: { 'retry-after': '30' } }),
    });
    const controller = new AbortController();
    const reason = new Error('shutting down');
    const error = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST', signal: controller.signal },
      { json: {}, onRetry: () => controller.abort(reason) },
    ).catch((e: unknown) => e);
    expect(error).toBe(reason);
    expect(server.arrivals).toHaveLength(1);
  });

  it('an abort during an attempt rejects with the reason; no further attempt', async () => {
    const hung = gate();
    onCleanup(() => hung.open());
    const controller = new AbortController();
    const reason = new Error('shutting down');
    const server = await startServer({
      beforeEffect: () => {
        controller.abort(reason);
        return hung.wait;
      },
    });
    const error = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST', signal: controller.signal },
      { json: {}, ...FAST },
    ).catch((e: unknown) => e);
    expect(error).toBe(reason);
    hung.open();
    expect(server.arrivals).toHaveLength(1);
  });
});

describe('the body, frozen once', () => {
  const form = new FormData();
  form.append('amount', '5');
  form.append('receipt', new Blob(['%PDF'], { type: 'application/pdf' }), 'r.pdf');
  const cases: Array<[string, RequestInit['body'] | undefined, unknown, RegExp]> = [
    ['string', 'amount=5', undefined, /^text\/plain;charset=UTF-8$/],
    ['Uint8Array', new Uint8Array([1, 2, 3]), undefined, /^$/],
    ['ArrayBuffer', new Uint8Array([4, 5]).buffer, undefined, /^$/],
    [
      'URLSearchParams',
      new URLSearchParams({ a: '1', b: 'x y' }),
      undefined,
      /^application\/x-www-form-urlencoded/,
    ],
    [
      'Blob',
      new Blob(['{"a":1}'], { type: 'application/vnd.x+json' }),
      undefined,
      /^application\/vnd\.x\+json$/,
    ],
    ['FormData (one multipart boundary)', form, undefined, /^multipart\/form-data; boundary=/],
    ['options.json', undefined, { amount: 5, at: '2024-01-01' }, /^application\/json$/],
  ];

  it.each(cases)(
    '%s: byte-identical on every attempt, with one Content-Type',
    async (name, body, json, type) => {
      const server = await startServer({
        intercept: (_a, nth) => (nth < 2 ? { status: 503 } : undefined),
      });
      const key = `body-${name.split(' ')[0]}`;
      const result = await idempotentFetch(
        `${server.url}/c`,
        { method: 'POST', ...(body !== undefined ? { body } : {}) },
        { key, ...(json !== undefined ? { json } : {}), ...FAST },
      );
      expect(result).toMatchObject({ attempts: 3 });
      const arrivals = server.arrivalsFor(key);
      expect(arrivals).toHaveLength(3);
      expect(new Set(arrivals.map((a) => a.bodySha256)).size).toBe(1);
      expect(new Set(arrivals.map((a) => a.contentType ?? '')).size).toBe(1);
      expect(arrivals[0]?.contentType ?? '').toMatch(type);
      if (json !== undefined) expect(arrivals[0]?.bodySha256).toBe(sha256(JSON.stringify(json)));
    },
  );

  it('a caller mutating its buffer after the call changes nothing that is sent', async () => {
    const server = await startServer({
      intercept: (_a, nth) => (nth === 0 ? { status: 503 } : undefined),
    });
    const bytes = new Uint8Array([1, 2, 3]);
    const pending = idempotentFetch(
      `${server.url}/c`,
      { method: 'POST', body: bytes },
      { key: 'k-mut', ...FAST, onRetry: () => bytes.fill(9) },
    );
    await pending;
    expect(server.arrivalsFor('k-mut').map((a) => a.bodySha256)).toEqual([
      sha256(new Uint8Array([1, 2, 3])),
      sha256(new Uint8Array([1, 2, 3])),
    ]);
  });
});

describe('the key header', () => {
  it("a custom header name and the draft's quoted form", async () => {
    const server = await startServer({ header: 'x-request-id' });
    const result = await idempotentFetch(
      `${server.url}/c`,
      { method: 'POST' },
      { json: {}, key: 'job-1', header: 'X-Request-Id', keyFormat: 'quoted' },
    );
    expect(result.response.status).toBe(201);
    expect(server.arrivals.map((a) => a.rawKey)).toEqual(['"job-1"']);
  });

  it('a key already in init.headers is adopted, and a conflicting options.key is refused', async () => {
    const server = await startServer();
    const init = { method: 'POST', headers: { 'Idempotency-Key': 'from-headers' } };
    const result = await idempotentFetch(`${server.url}/c`, init, { json: {} });
    expect(result.key).toBe('from-headers');
    await expect(
      idempotentFetch(`${server.url}/c`, init, { json: {}, key: 'other' }),
    ).rejects.toBeInstanceOf(ConfigurationError);
    expect(server.arrivals).toHaveLength(1);
  });
});
