/**
 * docs/http.md's "Stored headers" table against the code and a real replay: the default
 * list is DEFAULT_STORED_HEADERS and exactly what a replay carries; the "never stored"
 * names are refused in `storeHeaders`; extending the default stores one more.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ConfigurationError,
  createIdempotency,
  DEFAULT_STORED_HEADERS,
  type IdempotencyOptions,
} from '../../../src/http/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { repoRoot } from '../examples/support.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('stored_headers');
});
afterAll(async () => {
  await db.close();
});

/** The backticked names on the docs table's row that starts with `label`. */
function documented(label: string): string[] {
  const docs = fs.readFileSync(path.join(repoRoot, 'docs/http.md'), 'utf8');
  const row = docs.split('\n').find((line) => line.startsWith(`| ${label}`));
  if (row === undefined) throw new Error(`docs/http.md has no row "${label}"`);
  const names = row.split('|')[2] ?? '';
  return [...names.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
}

const EVERY_HEADER: Record<string, string> = {
  'content-type': 'application/json',
  'content-encoding': 'identity',
  'content-language': 'en',
  'content-disposition': 'inline',
  'content-location': '/charges/1',
  location: '/charges/1',
  etag: '"v1"',
  'last-modified': 'Tue, 01 Dec 2026 10:00:00 GMT',
  link: '</charges>; rel="collection"',
  'cache-control': 'no-store',
  expires: '0',
  'x-request-id': 'req-1',
  'x-charge-id': 'ch_1',
  'set-cookie': 'session=abc',
};

async function replayHeaders(
  options: Partial<IdempotencyOptions>,
  body = '{"charged":true}',
): Promise<{ first: Headers; replay: Headers }> {
  const idempotency = createIdempotency({
    pool: db.pool,
    schema: db.schema,
    scope: 'public',
    ...options,
  });
  try {
    const handle = idempotency.handler(
      () => new Response(body, { status: 201, headers: EVERY_HEADER }),
    );
    const key = randomUUID();
    const request = () =>
      new Request('http://api.test/charges', {
        method: 'POST',
        headers: { 'idempotency-key': key },
      });
    const first = await handle(request());
    await first.arrayBuffer();
    const replay = await handle(request());
    await replay.arrayBuffer();
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    return { first: first.headers, replay: replay.headers };
  } finally {
    await idempotency.close();
  }
}

const names = (headers: Headers): string[] => [...headers.keys()].sort();

describe('stored headers, as docs/http.md lists them', () => {
  it('the default list is DEFAULT_STORED_HEADERS, and exactly what a replay carries', async () => {
    const listed = documented('stored by default');
    expect(listed).toEqual([...DEFAULT_STORED_HEADERS]);
    const { first, replay } = await replayHeaders({});
    expect(first.get('x-request-id')).toBe('req-1'); // the first answer has everything
    expect(first.get('set-cookie')).toBe('session=abc');
    expect(names(replay)).toEqual([...listed, 'idempotent-replayed'].sort());
    for (const name of listed) expect(replay.get(name)).toBe(EVERY_HEADER[name]);
  });

  it('every name listed as never stored is refused in storeHeaders', async () => {
    const refused = documented('never stored');
    expect(refused).toContain('set-cookie');
    for (const name of refused)
      expect(() =>
        createIdempotency({ pool: db.pool, scope: 'public', storeHeaders: [name] }),
      ).toThrow(ConfigurationError);
    // Any other token is accepted.
    const accepted = createIdempotency({
      pool: db.pool,
      scope: 'public',
      storeHeaders: ['x-charge-id'],
    });
    await accepted.close();
  });

  it('extending the default stores one more; a body not kept drops content-type and content-encoding', async () => {
    const extended = await replayHeaders({
      storeHeaders: [...DEFAULT_STORED_HEADERS, 'x-charge-id'],
    });
    expect(extended.replay.get('x-charge-id')).toBe('ch_1');
    expect(extended.replay.get('x-request-id')).toBeNull();

    const omitted = await replayHeaders({ maxBodyBytes: 4 });
    expect(omitted.replay.get('idempotent-body-omitted')).toBe('too-large');
    expect(omitted.replay.get('content-type')).toBeNull();
    expect(omitted.replay.get('content-encoding')).toBeNull();
    expect(omitted.replay.get('location')).toBe('/charges/1');
  });
});
