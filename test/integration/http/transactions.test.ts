import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  createIdempotency,
  type IdempotencyContext,
  type IdempotencyOptions,
} from 'effectively-once/http';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { gate, paymentFixture, post } from './support.js';

const fixture = paymentFixture('http_tx');

describe.each(FRAMEWORKS)('%s: the transaction around the handler', (framework) => {
  it('a serialization failure runs the handler again in place; one effect, a fresh response', async () => {
    const server = await fixture.start({
      framework,
      hooks: { raise: (_key, attempt) => (attempt === 1 ? '40001' : undefined) },
    });
    const key = randomUUID();
    const answer = await post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 2 });
    expect(answer.status).toBe(201);
    expect(answer.headers['x-run']).toBe('2');
    // One Set-Cookie: the first run's headers did not leak into the second's.
    expect(answer.headers['set-cookie']?.split(/,\s*(?=session=)/)).toHaveLength(1);
    expect(await fixture.effects(key)).toBe(1);
  });

  it('serialization failures past serializationRetries: 503 + Retry-After, nothing applied', async () => {
    const server = await fixture.start({
      framework,
      idempotency: { serializationRetries: 1 },
      hooks: { raise: () => '40001' },
    });
    const key = randomUUID();
    const answer = await post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 2 });
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(await fixture.effects(key)).toBe(0);
  });

  it('a client that disconnects mid-request: the effect still commits once; its retry replays', async () => {
    const hold = gate();
    const arrived = gate();
    const server = await fixture.start({
      framework,
      hooks: {
        beforeEffect: async () => {
          arrived.open();
          await hold.wait;
        },
      },
    });
    const key = randomUUID();
    const body = { customerId: 'c', amountCents: 11 };
    const abort = new AbortController();
    const gone = fetch(`${server.url}/charges`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
      signal: abort.signal,
    }).catch((error: unknown) => error);
    await arrived.wait;
    abort.abort();
    const aborted = await gone;
    hold.open();
    expect(aborted).toMatchObject({ name: 'AbortError' });
    // The retry waits on the claim until the original commits, then replays it.
    const retry = await post(`${server.url}/charges`, key, body);
    expect(retry).toMatchObject({ status: 201, headers: { 'idempotent-replayed': 'true' } });
    expect(await fixture.effects(key)).toBe(1);
  });
});

describe('the core, called directly', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('http_core');
    await db.pool.query('CREATE TABLE effects (k text NOT NULL)');
  });
  afterAll(async () => db.close());

  const endpoint = (options: Partial<IdempotencyOptions> = {}) =>
    createIdempotency({
      pool: db.pool,
      scope: 'core',
      schema: db.schema,
      retention: false,
      ...options,
    });
  const request = (key: string | undefined, method = 'POST', body: string | null = '{}') =>
    new Request('http://localhost/things', {
      method,
      headers: key === undefined ? {} : { 'idempotency-key': key },
      body,
    });
  const effects = async (k: string): Promise<number> =>
    (await db.pool.query('SELECT 1 FROM effects WHERE k = $1', [k])).rowCount ?? -1;

  it('a handler past timeoutMs is rolled back: 503 + Retry-After; the retry applies once', async () => {
    const idempotency = endpoint({ handlerTimeoutMs: 300 });
    const key = randomUUID();
    let runs = 0;
    const handler = async (
      _r: Request,
      ctx: { tx: { query(sql: string, v: unknown[]): Promise<unknown> } },
    ) => {
      await ctx.tx.query('INSERT INTO effects (k) VALUES ($1)', [key]);
      if (++runs === 1) await new Promise((r) => setTimeout(r, 2000));
      return new Response('done', { status: 201 });
    };
    const slow = await idempotency.handle(request(key), handler);
    expect(slow.status).toBe(503);
    expect(slow.headers.get('retry-after')).toBe('1');
    expect(await slow.json()).toMatchObject({ code: 'EO_HANDLER_TIMEOUT' });
    const retry = await idempotency.handle(request(key), handler);
    expect(retry.status).toBe(201);
    expect(await effects(key)).toBe(1);
    await idempotency.close();
  });

  it('a handler that caught a failed statement and went on: 500, rolled back, key free', async () => {
    const idempotency = endpoint();
    const key = randomUUID();
    let runs = 0;
    const response = await idempotency.handle(request(key), async (_r, { tx }) => {
      await tx.query('INSERT INTO effects (k) VALUES ($1)', [key]);
      if (++runs === 1) await tx.query('SELECT 1/0').catch(() => undefined);
      return new Response('ok', { status: 201 });
    });
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({ code: 'EO_TX_ABORTED' });
    expect(await effects(key)).toBe(0);
    const retry = await idempotency.handle(request(key), async (_r, { tx }) => {
      await tx.query('INSERT INTO effects (k) VALUES ($1)', [key]);
      return new Response('ok', { status: 201 });
    });
    expect(retry.status).toBe(201);
    await idempotency.close();
  });

  it('a method outside `methods`: without a key it runs once in its own transaction, nothing kept', async () => {
    const idempotency = endpoint();
    const k = randomUUID();
    const run = () =>
      idempotency.handle(request(undefined, 'PUT', '{}'), async (_r, { tx }) => {
        await tx.query('INSERT INTO effects (k) VALUES ($1)', [k]);
        return new Response('put', { status: 200 });
      });
    expect((await run()).status).toBe(200);
    expect((await run()).headers.get('idempotent-replayed')).toBeNull();
    expect(await effects(k)).toBe(2);
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM ${db.table('eo_idempotency_keys')} WHERE scope = 'core' AND method = 'PUT'`,
    );
    expect(rows[0]).toEqual({ n: 0 });
    await idempotency.close();
  });

  it('prunes keys past the window; a pruned key runs afresh', async () => {
    const idempotency = endpoint();
    const key = randomUUID();
    const handler = async (
      _r: Request,
      ctx: { tx: { query(sql: string, v: unknown[]): Promise<unknown> } },
    ) => {
      await ctx.tx.query('INSERT INTO effects (k) VALUES ($1)', [key]);
      return new Response('made', { status: 201 });
    };
    await idempotency.handle(request(key), handler);
    expect(await idempotency.prune({ olderThan: 3600_000 })).toBe(0);
    await db.pool.query(
      `UPDATE ${db.table('eo_idempotency_keys')} SET created_at = now() - interval '2 hours' WHERE idempotency_key = $1`,
      [key],
    );
    expect(await idempotency.prune({ olderThan: 3600_000 })).toBe(1);
    const again = await idempotency.handle(request(key), handler);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(await effects(key)).toBe(2);
    await idempotency.close();
  });

  it("a table name holding the functions' dollar-quote tag still gets working functions", async () => {
    const idempotency = endpoint({ table: 'keys$eo$odd' });
    const key = randomUUID();
    const handler = async (_r: Request, ctx: IdempotencyContext) => {
      await ctx.tx.query('INSERT INTO effects (k) VALUES ($1)', [ctx.key]);
      return new Response('ok', { status: 201 });
    };
    expect((await idempotency.handle(request(key), handler)).status).toBe(201);
    const replay = await idempotency.handle(request(key), handler);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(await effects(key)).toBe(1);
    await idempotency.close();
  });

  it('a key row deleted under the handler: the store refuses it, nothing commits, the retry applies once', async () => {
    const idempotency = endpoint();
    const key = randomUUID();
    let runs = 0;
    const handler = async (_r: Request, ctx: IdempotencyContext) => {
      runs++;
      await ctx.tx.query('INSERT INTO effects (k) VALUES ($1)', [ctx.key]);
      // The row the claim inserted, gone from this transaction (as a prune could not,
      // but a hand-written DELETE in the handler could).
      if (runs === 1)
        await ctx.tx.query(
          `DELETE FROM ${db.table('eo_idempotency_keys')} WHERE idempotency_key = $1`,
          [ctx.key],
        );
      return new Response('ok', { status: 201 });
    };
    const first = await idempotency.handle(request(key), handler);
    expect(first.status).toBeGreaterThanOrEqual(500);
    expect(await effects(key)).toBe(0);
    const retry = await idempotency.handle(request(key), handler);
    expect(retry.status).toBe(201);
    expect(await effects(key)).toBe(1);
    await idempotency.close();
  });

  it('migrates once and takes no lock when the table is there; close() refuses new requests', async () => {
    const idempotency = endpoint();
    await idempotency.migrate();
    await idempotency.migrate();
    const { rows } = await db.pool.query<{ columns: string[] }>(
      `SELECT array_agg(column_name::text ORDER BY ordinal_position) AS columns
         FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'eo_idempotency_keys'`,
      [db.schema],
    );
    expect(rows[0]?.columns).toEqual([
      'scope',
      'idempotency_key',
      'method',
      'route',
      'fingerprint',
      'status',
      'headers',
      'body',
      'body_omitted',
      'created_at',
      'expires_at',
    ]);
    await idempotency.close();
    const refused = await idempotency.handle(request(randomUUID()), async () => new Response('x'));
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ code: 'EO_SHUTDOWN' });
  });
});

describe.each(FRAMEWORKS)('%s: a handler past timeoutMs', (framework) => {
  it('is answered 503 + Retry-After while it still runs; nothing is applied', async () => {
    const hold = gate();
    const server = await fixture.start({
      framework,
      idempotency: { handlerTimeoutMs: 300 },
      hooks: { beforeEffect: () => hold.wait },
    });
    const key = randomUUID();
    const answer = await post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 4 });
    hold.open();
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBe('1');
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'EO_HANDLER_TIMEOUT' });
    expect(await fixture.effects(key)).toBe(0);
  });
});
