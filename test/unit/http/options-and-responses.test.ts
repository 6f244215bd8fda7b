import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import {
  ClaimBusyError,
  ConfigurationError,
  createIdempotency,
  DatabaseError,
  IdempotencyKeyMissingError,
  IdempotencyKeyReusedError,
  type IdempotencyOptions,
} from 'effectively-once/http';
import {
  CommitUnknownError,
  HandlerTimeoutError,
  TransactionAbortedError,
} from '../../../src/errors.js';
import { readRequestBody, readResponseBody } from '../../../src/http/body.js';
import { resolveOptions } from '../../../src/http/options.js';
import { problemResponse } from '../../../src/http/problem.js';
import { recordOf, replayOf } from '../../../src/http/replay.js';

// Never connected to: options are checked before anything touches the pool.
const pool = { connect: () => Promise.reject(new Error('no database')) } as unknown as Pool;
const valid: IdempotencyOptions = { pool, scope: 'single-tenant' };

describe('createIdempotency options', () => {
  it('has the documented defaults', () => {
    const cfg = resolveOptions(valid);
    expect(cfg).toMatchObject({
      header: 'Idempotency-Key',
      maxKeyLength: 255,
      mismatchStatus: 422,
      lockTimeoutMs: 5000,
      retryAfterSeconds: 1,
      maxBodyBytes: 1024 * 1024,
      maxRequestBytes: 1024 * 1024,
      handlerTimeoutMs: 30_000,
      serializationRetries: 3,
      table: { schema: 'public', table: 'eo_idempotency_keys' },
      migrate: true,
      retention: {
        olderThanMs: 24 * 3600_000,
        intervalMs: 60_000,
        batchSize: 1000,
        dutyCycle: 0.5,
      },
    });
    expect([...cfg.methods]).toEqual(['POST', 'PATCH']);
    expect(cfg.rollbackOn(500)).toBe(true);
    expect(cfg.rollbackOn(499)).toBe(false);
    expect(cfg.storeHeaders.has('location')).toBe(true);
    expect(cfg.storeHeaders.has('set-cookie')).toBe(false);
    expect(cfg.route(new Request('http://h/orders/1?x=2'))).toBe('/orders/1');
  });

  it("concurrent: 'reject' waits a millisecond, the least lock_timeout there is", () => {
    expect(
      resolveOptions({ ...valid, concurrent: 'reject', lockTimeoutMs: 9000 }).lockTimeoutMs,
    ).toBe(1);
  });

  it.each([
    [{ pool: {} }, 'pool'],
    [{ scope: undefined }, 'scope'],
    [{ scope: 'x'.repeat(1025) }, 'scope'],
    [{ scope: 'a\u0000b' }, 'scope'],
    [{ scope: '\u001f["webhook:github"]' }, 'scope'],
    [{ scope: 'tenant-\ud800' }, 'scope'],
    [{ scope: '\udc00tenant' }, 'scope'],
    [{ header: 'Bad Header' }, 'header'],
    [{ methods: ['PO ST'] }, 'methods'],
    [{ fingerprint: 'sha1' }, 'fingerprint'],
    [{ concurrent: 'queue' }, 'concurrent'],
    [{ lockTimeoutMs: 0 }, 'lockTimeoutMs'],
    [{ handlerTimeoutMs: -1 }, 'handlerTimeoutMs'],
    [{ maxKeyLength: 1025 }, 'maxKeyLength'],
    [{ mismatchStatus: 500 }, 'mismatchStatus'],
    [{ storeHeaders: ['Set-Cookie'] }, 'storeHeaders'],
    [{ storeHeaders: ['transfer-encoding'] }, 'storeHeaders'],
    [{ maxBodyBytes: -1 }, 'maxBodyBytes'],
    [{ table: '' }, 'table'],
    [{ retention: { olderThanMs: 0 } }, 'retention.olderThanMs'],
    [{ retention: { dutyCycle: 2 } }, 'retention.dutyCycle'],
    [{ isolationLevel: 'snapshot' }, 'isolationLevel'],
    [{ onCommitted: 'log' }, 'onCommitted'],
    [{ telemetry: {} }, 'telemetry'],
  ])('refuses %j', (bad, option) => {
    const attempt = () => createIdempotency({ ...valid, ...bad } as unknown as IdempotencyOptions);
    expect(attempt).toThrow(ConfigurationError);
    expect(attempt).toThrow(new RegExp(`"${option.replace('.', '\\.')}"`));
  });

  it('retention: false prunes nothing in the background', () => {
    expect(resolveOptions({ ...valid, retention: false }).retention).toBeUndefined();
  });
});

describe('problem answers', () => {
  const settings = resolveOptions(valid);

  it.each([
    [new IdempotencyKeyMissingError('Idempotency-Key header'), 400, 'key-missing', false],
    [new IdempotencyKeyReusedError('k', 'fingerprint'), 422, 'key-reused', false],
    [new IdempotencyKeyReusedError('k', 'endpoint'), 422, 'key-reused-on-another-endpoint', false],
    [new ClaimBusyError('k', 5000), 409, 'request-in-progress', true],
    [new HandlerTimeoutError('k', 100), 503, 'unavailable', true],
    [new DatabaseError('connect', new Error('down')), 503, 'unavailable', true],
    [new CommitUnknownError('k', new Error('gone')), 503, 'outcome-unknown', true],
    [new TransactionAbortedError('k', 'aborted', undefined), 500, 'rolled-back', false],
  ] as const)('%s → %i %s', async (error, status, slug, retry) => {
    const response = problemResponse(error, settings);
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    expect(response.headers.get('retry-after')).toBe(retry ? '1' : null);
    expect(await response.json()).toMatchObject({
      type: `urn:effectively-once:problem:${slug}`,
      status,
      code: error.code,
    });
  });

  it('mismatchStatus 400 answers as Stripe does', () => {
    const stripe = resolveOptions({ ...valid, mismatchStatus: 400 });
    expect(problemResponse(new IdempotencyKeyReusedError('k', 'fingerprint'), stripe).status).toBe(
      400,
    );
  });
});

describe('stored and replayed responses', () => {
  const allowed = resolveOptions(valid).storeHeaders;

  it('stores the status, the allowlisted headers and the body; never Set-Cookie', () => {
    const response = new Response('x', {
      status: 201,
      headers: {
        'content-type': 'application/json',
        location: '/a/1',
        'set-cookie': 's=1',
        'x-trace': 't',
      },
    });
    const record = recordOf(response, new Uint8Array([1, 2]), null, allowed);
    expect(record).toEqual({
      status: 201,
      headers: { 'content-type': 'application/json', location: '/a/1' },
      body: new Uint8Array([1, 2]),
      bodyOmitted: null,
    });
  });

  it('replays the bytes with Idempotent-Replayed: true', async () => {
    const replay = replayOf({
      method: 'POST',
      route: '/a',
      fingerprint: Buffer.alloc(32),
      status: 201,
      headers: { 'content-type': 'application/json', location: '/a/1' },
      body: Buffer.from('{"id":1}'),
      bodyOmitted: null,
    });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.headers.get('location')).toBe('/a/1');
    expect(await replay.text()).toBe('{"id":1}');
  });

  it('a body not kept replays empty, without the headers that described it', async () => {
    const replay = replayOf({
      method: 'POST',
      route: '/a',
      fingerprint: Buffer.alloc(32),
      status: 200,
      headers: { 'content-type': 'text/csv', 'content-encoding': 'gzip', location: '/e/1' },
      body: null,
      bodyOmitted: 'too-large',
    });
    expect(replay.headers.get('idempotent-body-omitted')).toBe('too-large');
    expect(replay.headers.get('content-type')).toBeNull();
    expect(replay.headers.get('content-encoding')).toBeNull();
    expect(replay.headers.get('location')).toBe('/e/1');
    expect(await replay.text()).toBe('');
  });

  it('a 204 replays with no body at all', () => {
    const replay = replayOf({
      method: 'POST',
      route: '/a',
      fingerprint: Buffer.alloc(32),
      status: 204,
      headers: {},
      body: Buffer.alloc(0),
      bodyOmitted: null,
    });
    expect(replay.body).toBeNull();
  });
});

describe('bounded bodies', () => {
  it('refuses a request body over the limit, by Content-Length or by counting', async () => {
    const big = new Request('http://h/', { method: 'POST', body: 'x'.repeat(11) });
    await expect(readRequestBody(big, 10)).rejects.toMatchObject({ code: 'EO_REQUEST_TOO_LARGE' });
    const chunked = new Request('http://h/', {
      method: 'POST',
      body: new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array(6));
          c.enqueue(new Uint8Array(6));
          c.close();
        },
      }),
      duplex: 'half',
    });
    await expect(readRequestBody(chunked, 10)).rejects.toMatchObject({
      code: 'EO_REQUEST_TOO_LARGE',
    });
    const fits = new Request('http://h/', { method: 'POST', body: 'x'.repeat(10) });
    expect(await readRequestBody(fits, 10)).toHaveLength(10);
  });

  it('a response body over the limit comes back as a stream of all of it', async () => {
    const kept = await readResponseBody(new Response('abc').body, 3);
    expect(kept).toEqual({ kind: 'complete', bytes: new TextEncoder().encode('abc') });
    const large = await readResponseBody(new Response('abcd').body, 3);
    expect(large.kind).toBe('too-large');
    if (large.kind === 'too-large') expect(await new Response(large.stream).text()).toBe('abcd');
  });
});
