/**
 * The stored answer round-trips byte for byte through every data layer: the status,
 * the stored headers (quotes, backslashes, `?`, `$1`, Latin-1 bytes above 0x7F) and a
 * body of every byte value, invalid UTF-8 and a string body with a lone UTF-16
 * surrogate (encoded by the Response as U+FFFD); the key and the scope with the
 * characters a layer's placeholders or literal escaping could misread. The first
 * answer and its replay must be the very bytes the handler answered. The library's own
 * pg door runs the same case, as the reference.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createIdempotency, REPLAYED_HEADER } from '../../../src/http/index.js';
import type { DataLayer } from '../../../src/data-layer.js';
import { createLayerDatabase, type LayerDatabase } from './matrix-consumer.js';
import type { LayerFixture, OpenedLayer } from './fixture.js';
import { drizzlePgFixture } from './drizzle-pg.fixture.js';
import { drizzlePostgresJsFixture } from './drizzle-postgres-js.fixture.js';
import { knexFixture } from './knex.fixture.js';
import { kyselyFixture } from './kysely.fixture.js';
import { pgLayerFixture } from './pg-layer.fixture.js';
import { postgresJsFixture } from './postgres-js.fixture.js';
import { prismaFixture } from './prisma.fixture.js';
import { typeormFixture } from './typeorm.fixture.js';

const HEADERS: Record<string, string> = {
  'content-type': 'application/octet-stream',
  'x-odd': `a"b\\c ? $1 'q' ?? \\? :name café ÿ`,
  'x-latin': 'Grüße, ½ ¿ ß',
};
const STORED = ['content-type', 'x-odd', 'x-latin'];

/** Every byte value, a UTF-8 encoded lone surrogate (invalid UTF-8), a lone surrogate sent as text. */
const BODY = new Uint8Array([
  ...Array.from({ length: 256 }, (_, i) => i),
  0xed,
  0xa0,
  0x80,
  ...new TextEncoder().encode('x\ud800y\udc00'),
]);

const SCOPE = `shop ? $1 'q' \\ "é"`;
const KEY = (): string => `k-${randomUUID()} ? $1 'q' \\ ?? :x`;

/** What an answer is, byte for byte. */
async function bytesOf(response: Response): Promise<{
  status: number;
  headers: Record<string, string | null>;
  body: number[];
}> {
  const headers: Record<string, string | null> = {};
  for (const name of Object.keys(HEADERS)) headers[name] = response.headers.get(name);
  return {
    status: response.status,
    headers,
    body: [...new Uint8Array(await response.arrayBuffer())],
  };
}

function roundTrip<Tx>(name: string, layerOf: () => DataLayer<Tx> | undefined): void {
  it(`${name}: the answer and its replay are the bytes answered`, async () => {
    const idempotency = createIdempotency<Tx>({
      pool: db.pool,
      dataLayer: layerOf(),
      scope: SCOPE,
      storeHeaders: STORED,
    });
    try {
      let runs = 0;
      const handler = idempotency.handler(async () => {
        runs++;
        return new Response(BODY, { status: 201, headers: HEADERS });
      });
      const key = KEY();
      const request = (): Request =>
        new Request('http://local/answers', {
          method: 'POST',
          headers: { 'idempotency-key': key },
          body: 'x',
        });
      const first = await handler(request());
      const replay = await handler(request());
      const expected = { status: 201, headers: HEADERS, body: [...BODY] };
      expect({
        runs,
        first: await bytesOf(first),
        replay: await bytesOf(replay),
        replayed: replay.headers.get(REPLAYED_HEADER),
      }).toEqual({ runs: 1, first: expected, replay: expected, replayed: 'true' });
    } finally {
      await idempotency.close({ timeoutMs: 2000 });
    }
  });
}

let db: LayerDatabase;
const fixtures: Array<LayerFixture<unknown>> = [
  prismaFixture,
  drizzlePgFixture,
  drizzlePostgresJsFixture,
  knexFixture,
  typeormFixture,
  kyselyFixture,
  postgresJsFixture,
  pgLayerFixture,
] as Array<LayerFixture<unknown>>;
const opened = new Map<string, OpenedLayer<unknown>>();

describe('the stored answer, byte for byte, through every layer', () => {
  beforeAll(async () => {
    db = await createLayerDatabase('stored_answer');
    for (const fixture of fixtures) opened.set(fixture.name, await fixture.open(db.url));
  }, 60_000);
  afterAll(async () => {
    for (const layer of opened.values()) await layer.close();
    await db?.close();
  });

  roundTrip('the pg door (no layer)', () => undefined);
  for (const fixture of fixtures) roundTrip(fixture.name, () => opened.get(fixture.name)!.layer);
});
