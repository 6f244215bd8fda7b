/**
 * The HTTP door as a Lambda function: `lambdaHttpHandler` invoked with events built as
 * API Gateway (HTTP API 2.0, REST 1.0) and function URLs deliver them, over real
 * Postgres. A retry gets the stored answer byte for byte (text, binary and gzipped
 * bodies, repeated headers); Set-Cookie goes out the first time only; duplicates at
 * once, in one environment or two, apply once; the invocation's deadline less the
 * margin cuts the handler and the wait, and the request is rolled back and answered 503.
 */
import { randomUUID } from 'node:crypto';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { APIGatewayProxyResult, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import pg from 'pg';
import {
  createIdempotency,
  type Idempotency,
  type IdempotencyContext,
} from 'effectively-once/http';
import { lambdaHttpHandler, type LambdaHttpHandler } from 'effectively-once/lambda';
import { invocationContext } from '../../../kit/lambda/invoker.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { eventV1, eventV2, type HttpCall } from './http-events.js';

const TIMEOUT = 90_000;
let db: TestDatabase;
let idempotency: Idempotency;
/** A second execution environment: its own pool and endpoint over the same database. */
let otherPool: pg.Pool;
let other: Idempotency;
let runs = 0;

/** Every answer the routes give: what the tests compare byte for byte. */
async function route(request: Request, { tx, key }: IdempotencyContext): Promise<Response> {
  runs++;
  const url = new URL(request.url);
  const body = Buffer.from(await request.arrayBuffer());
  await tx.query('INSERT INTO effects (key, path) VALUES ($1, $2)', [key, url.pathname]);
  switch (url.pathname) {
    case '/echo':
      return Response.json(
        {
          bytes: body.toString('base64'),
          tags: url.searchParams.getAll('tag'),
          xTag: request.headers.get('x-tag'),
          cookie: request.headers.get('cookie'),
          n: randomUUID(),
        },
        { status: 201 },
      );
    case '/binary':
      // Every byte value, and the request's bytes reversed: not text, never UTF-8.
      return new Response(
        Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), body.reverse()]),
        {
          status: 200,
          headers: { 'content-type': 'application/octet-stream' },
        },
      );
    case '/gzip':
      return new Response(gzipSync(JSON.stringify({ n: randomUUID(), big: 'x'.repeat(5000) })), {
        status: 200,
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      });
    case '/cookies': {
      const headers = new Headers({ 'content-type': 'text/plain; charset=utf-8' });
      headers.append('set-cookie', `session=${randomUUID()}; Path=/; HttpOnly`);
      headers.append('set-cookie', 'theme=dark; Path=/');
      headers.append('content-language', 'en');
      headers.append('content-language', 'de');
      return new Response(`héllo ${randomUUID()}`, { status: 200, headers });
    }
    case '/slow':
      // Ignores its signal: only the deadline's rollback stops its effect.
      await tx.query('SELECT pg_sleep($1::float8 / 1000)', [
        Number(request.headers.get('x-sleep-ms') ?? 5_000),
      ]);
      return new Response('done', { status: 200 });
    default:
      return new Response('not found', { status: 404 });
  }
}

beforeAll(async () => {
  db = await createTestDatabase('lambda_http');
  await db.pool.query('CREATE TABLE effects (key text NOT NULL, path text NOT NULL)');
  idempotency = createIdempotency({ pool: db.pool, schema: db.schema, scope: 'public' });
  otherPool = new pg.Pool({ ...db.pool.options, max: 4 });
  otherPool.on('error', () => undefined);
  other = createIdempotency({ pool: otherPool, schema: db.schema, scope: 'public' });
});
afterAll(async () => {
  await idempotency?.close();
  await other?.close();
  await otherPool?.end();
  await db?.close();
});

const context = (ms = 30_000) => invocationContext(Date.now() + ms);

async function effects(key: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM effects WHERE key = $1',
    [key],
  );
  return Number(rows[0]!.n);
}

function keyed(call: HttpCall, key: string): HttpCall {
  return { ...call, headers: [...(call.headers ?? []), ['idempotency-key', key]] };
}

/** What a client of API Gateway gets: status, headers, the body's bytes. */
function bytesOf(result: APIGatewayProxyStructuredResultV2 | APIGatewayProxyResult): Buffer {
  const body = result.body ?? '';
  return result.isBase64Encoded === true ? Buffer.from(body, 'base64') : Buffer.from(body, 'utf8');
}

/** The answer less the replay marker, which only the replay has. */
function stored<T extends { headers?: Record<string, unknown> | undefined }>(result: T): T {
  const { ['idempotent-replayed']: _r, ...headers } = result.headers ?? {};
  return { ...result, headers };
}

describe('lambdaHttpHandler: payload 2.0 (HTTP API, function URLs)', () => {
  let handler: LambdaHttpHandler;
  beforeAll(() => {
    handler = lambdaHttpHandler(idempotency, route);
  });

  it(
    'replays a text answer as stored, with the query, repeated headers and cookies the handler saw',
    async () => {
      const key = randomUUID();
      const call = keyed(
        {
          method: 'POST',
          path: '/echo',
          query: [
            ['tag', 'a'],
            ['tag', 'b'],
          ],
          headers: [
            ['content-type', 'application/json'],
            ['x-tag', '1'],
            ['x-tag', '2'],
          ],
          cookies: ['a=1', 'b=2'],
          body: '{"amount":1}',
        },
        key,
      );
      const first = await handler(eventV2(call), context());
      expect(first.statusCode).toBe(201);
      expect(first.isBase64Encoded).toBe(false);
      const seen = JSON.parse(first.body!) as Record<string, unknown>;
      expect(seen).toMatchObject({
        bytes: Buffer.from('{"amount":1}').toString('base64'),
        tags: ['a', 'b'],
        xTag: '1,2',
        cookie: 'a=1; b=2',
      });
      const again = await handler(eventV2(call), context());
      expect(again.headers?.['idempotent-replayed']).toBe('true');
      expect(stored(again)).toEqual(stored(first));
      expect(await effects(key)).toBe(1);
    },
    TIMEOUT,
  );

  it(
    'carries a binary request and answer in base64, the same bytes again on a retry',
    async () => {
      const key = randomUUID();
      const sent = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x7f, 0xc3]);
      const call = keyed({ method: 'PUT', path: '/binary', body: sent }, key);
      const first = await handler(eventV2(call), context());
      expect(first).toMatchObject({ statusCode: 200, isBase64Encoded: true });
      const bytes = bytesOf(first);
      expect(bytes.subarray(0, 256)).toEqual(Buffer.from(Array.from({ length: 256 }, (_, i) => i)));
      expect(bytes.subarray(256)).toEqual(Buffer.from(sent).reverse());
      const again = await handler(eventV2(call), context());
      expect(stored(again)).toEqual(stored(first));
      expect(await effects(key)).toBe(1);
    },
    TIMEOUT,
  );

  it(
    'sends a gzipped answer as base64 with its Content-Encoding, and replays it unchanged',
    async () => {
      const key = randomUUID();
      const call = keyed({ method: 'POST', path: '/gzip', body: '' }, key);
      const first = await handler(eventV2(call), context());
      expect(first).toMatchObject({ statusCode: 200, isBase64Encoded: true });
      expect(first.headers?.['content-encoding']).toBe('gzip');
      expect(JSON.parse(gunzipSync(bytesOf(first)).toString())).toMatchObject({
        big: 'x'.repeat(5000),
      });
      const again = await handler(eventV2(call), context());
      expect(bytesOf(again)).toEqual(bytesOf(first));
      expect(stored(again)).toEqual(stored(first));
      expect(await effects(key)).toBe(1);
    },
    TIMEOUT,
  );

  it(
    'sends Set-Cookie as cookies the first time only: a replay has the stored headers, never a cookie',
    async () => {
      const key = randomUUID();
      const call = keyed({ method: 'POST', path: '/cookies', body: 'x' }, key);
      const first = await handler(eventV2(call), context());
      expect(first.cookies).toHaveLength(2);
      expect(first.cookies![1]).toBe('theme=dark; Path=/');
      expect(first.headers?.['set-cookie']).toBeUndefined();
      expect(first.headers?.['content-language']).toBe('en, de');
      expect(first.isBase64Encoded).toBe(false);
      const again = await handler(eventV2(call), context());
      expect(again.cookies).toBeUndefined();
      const { cookies: _c, ...firstWithoutCookies } = first;
      expect(stored(again)).toEqual(stored(firstWithoutCookies));
      expect(await effects(key)).toBe(1);
    },
    TIMEOUT,
  );
});

describe('lambdaHttpHandler: payload 1.0 (REST API)', () => {
  let handler: LambdaHttpHandler;
  beforeAll(() => {
    handler = lambdaHttpHandler(idempotency, route);
  });

  it(
    'reads multi-value headers and query parameters, answers cookies in multiValueHeaders, replays the rest',
    async () => {
      const key = randomUUID();
      const call = keyed(
        {
          method: 'POST',
          path: '/echo',
          query: [
            ['tag', 'a'],
            ['tag', 'b'],
          ],
          headers: [
            ['X-Tag', '1'],
            ['X-Tag', '2'],
          ],
          cookies: ['a=1', 'b=2'],
          body: 'plain',
        },
        key,
      );
      const first = await handler(eventV1(call), context());
      expect(first.statusCode).toBe(201);
      expect(JSON.parse(first.body)).toMatchObject({
        tags: ['a', 'b'],
        xTag: '1, 2',
        cookie: 'a=1; b=2',
      });
      const again = await handler(eventV1(call), context());
      expect(again.headers?.['idempotent-replayed']).toBe('true');
      expect(stored(again)).toEqual(stored(first));

      const cookieKey = randomUUID();
      const cookies = keyed({ method: 'POST', path: '/cookies', body: 'x' }, cookieKey);
      const set = await handler(eventV1(cookies), context());
      expect(set.multiValueHeaders?.['set-cookie']).toHaveLength(2);
      const replay = await handler(eventV1(cookies), context());
      expect(replay.multiValueHeaders).toBeUndefined();
      expect(replay.body).toBe(set.body);
      const binaryKey = randomUUID();
      const binary = keyed(
        { method: 'POST', path: '/binary', body: Buffer.from([1, 2, 3]) },
        binaryKey,
      );
      const b1 = await handler(eventV1(binary), context());
      expect(b1.isBase64Encoded).toBe(true);
      expect(bytesOf(await handler(eventV1(binary), context()))).toEqual(bytesOf(b1));
      expect([await effects(key), await effects(cookieKey), await effects(binaryKey)]).toEqual([
        1, 1, 1,
      ]);
    },
    TIMEOUT,
  );
});

describe('lambdaHttpHandler: duplicates and the deadline', () => {
  it(
    'applies duplicates sent at once to two execution environments once, and answers all of them the same',
    async () => {
      const key = randomUUID();
      const here = lambdaHttpHandler(idempotency, route);
      const there = lambdaHttpHandler(other, route);
      const call = keyed({ method: 'POST', path: '/echo', body: 'same' }, key);
      const results = await Promise.all(
        Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? here : there)(eventV2(call), context())),
      );
      expect(await effects(key)).toBe(1);
      for (const result of results) expect(result.statusCode).toBe(201);
      expect(new Set(results.map((r) => r.body)).size).toBe(1);
      expect(results.filter((r) => r.headers?.['idempotent-replayed'] !== 'true')).toHaveLength(1);
    },
    TIMEOUT,
  );

  it(
    'rolls back a handler still running at the deadline less the margin, answers 503, and applies the retry once',
    async () => {
      const key = randomUUID();
      const handler = lambdaHttpHandler(idempotency, route, { deadlineMarginMs: 1_000 });
      const call = keyed({ method: 'POST', path: '/slow', body: '' }, key);
      const cut = await handler(eventV2(call), context(2_500));
      expect(cut.statusCode).toBe(503);
      expect(await effects(key)).toBe(0);
      // The same key with no time left: not run at all.
      const before = runs;
      const none = await handler(eventV2(call), context(500));
      expect(none.statusCode).toBe(503);
      expect(runs).toBe(before);
      expect(await effects(key)).toBe(0);
      // The client's retry, quick this time (the fingerprint ignores the header).
      const quick = { ...call, headers: [...call.headers!, ['x-sleep-ms', '0']] } as HttpCall;
      const done = await handler(eventV2(quick), context());
      expect(done).toMatchObject({ statusCode: 200, body: 'done' });
      expect(await effects(key)).toBe(1);
    },
    TIMEOUT,
  );

  it(
    'refuses what is not an HTTP event with a typed error',
    async () => {
      const handler = lambdaHttpHandler(idempotency, route);
      await expect(handler({ Records: [] } as never, context())).rejects.toMatchObject({
        code: 'EO_CONFIGURATION',
      });
    },
    TIMEOUT,
  );
});
