/**
 * Retries of one key in one process wait behind one connection (single flight): all are
 * answered from the stored row when the original commits, or run afresh one at a time
 * when it rolls back. Every test waits on conditions (the requests seen by telemetry, the
 * handlers entered), never on time.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createIdempotency, headerSource, type WebhookOptions } from 'effectively-once/http';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import {
  FRAMEWORKS,
  startPaymentServer,
  type PaymentServer,
  type PaymentServerOptions,
} from '../../../kit/payments/payments.js';
import { waitFor } from '../../helpers/wait-for.js';
import { startApp } from './apps.js';
import { answer, arrivals, gate, post, type Answer } from './support.js';

let db: TestDatabase;
const closing: Array<() => Promise<void>> = [];

beforeAll(async () => {
  db = await createTestDatabase('http_waiting_retries', { max: 5 });
  await db.pool.query(
    'CREATE TABLE IF NOT EXISTS hooks_seen (sender text NOT NULL, delivery text NOT NULL)',
  );
});
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});
afterAll(async () => {
  await db.close();
});

/** A pool of `max` connections of its own, closed after the test. */
function poolOf(max: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl(),
    max,
    options: `-c search_path=${db.schema}`,
  });
  pool.on('error', () => undefined);
  return pool;
}

interface Started {
  server: PaymentServer;
  /** Handlers that reached the effect of a `slow-` key (held until released). */
  entered: () => number;
  release: () => void;
  arrived: () => number;
}

/** A payment server on a pool of `max` connections; `slow-` keys are held before their effect. */
async function start(
  framework: PaymentServerOptions['framework'],
  max: number,
  options: { idempotency?: PaymentServerOptions['idempotency']; failFirst?: boolean } = {},
): Promise<Started> {
  const pool = poolOf(max);
  const hold = gate();
  const seen = arrivals();
  let entered = 0;
  let runs = 0;
  const server = await startPaymentServer({
    framework,
    pool,
    schema: db.schema,
    idempotency: {
      acquireTimeoutMs: 1500,
      retryAfterSeconds: 2,
      telemetry: seen.telemetry,
      ...options.idempotency,
    },
    hooks: {
      beforeEffect: async (key) => {
        if (!key.startsWith('slow-')) return;
        entered++;
        await hold.wait;
      },
      // The first run of the server answers 503 (rolled back) when asked to.
      fail: () => (options.failFirst === true && runs++ === 0 ? 503 : undefined),
    },
  });
  closing.push(async () => {
    hold.open();
    await server.close();
    await pool.end();
  });
  return { server, entered: () => entered, release: hold.open, arrived: seen.count };
}

async function effects(key: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM charges WHERE idem_key = $1',
    [key],
  );
  return rows[0]?.n ?? -1;
}

const replayed = (a: Answer): boolean => a.headers['idempotent-replayed'] === 'true';

describe.each(FRAMEWORKS)('%s: retries of one key wait behind one connection', (framework) => {
  it('a burst of 50 on a running original: one execution, 49 replays', async () => {
    const { server, entered, release, arrived } = await start(framework, 3);
    const url = `${server.url}/charges`;
    const body = { customerId: 'c', amountCents: 100 };
    const key = `slow-${randomUUID()}`;
    const original = post(url, key, body);
    await waitFor(() => entered() === 1, { what: 'the original in its handler' });
    const retries = Array.from({ length: 49 }, () => post(url, key, body));
    await waitFor(() => arrived() === 50, { what: 'all 50 requests at the claim' });
    // The 49 waiting hold no connection: another key still gets one of the pool's three.
    const other = await post(url, randomUUID(), body);
    expect(other.status).toBe(201);
    release();
    const first = await original;
    expect(first.status).toBe(201);
    expect(replayed(first)).toBe(false);
    const all = await Promise.all(retries);
    expect(all.map((a) => a.status)).toEqual(all.map(() => 201));
    expect(all.filter(replayed)).toHaveLength(49);
    for (const a of all) expect(a.body).toBe(first.body);
    expect(await effects(key)).toBe(1);
    expect(server.idempotency.stats()).toMatchObject({ executed: 2, replayed: 49, busy: 0 });
  });

  it("a burst of a committed key's retries: only replays", async () => {
    const { server } = await start(framework, 3);
    const url = `${server.url}/charges`;
    const body = { customerId: 'c', amountCents: 7 };
    const key = randomUUID();
    const first = await post(url, key, body);
    expect(first.status).toBe(201);
    const all = await Promise.all(Array.from({ length: 50 }, () => post(url, key, body)));
    expect(all.map((a) => a.status)).toEqual(all.map(() => 201));
    expect(all.filter(replayed)).toHaveLength(50);
    for (const a of all) expect(a.body).toBe(first.body);
    expect(server.idempotency.stats()).toMatchObject({ executed: 1, replayed: 50, busy: 0 });
  });

  it('a waiter with another body gets the mismatch answer, not the original', async () => {
    const { server, entered, release, arrived } = await start(framework, 3);
    const url = `${server.url}/charges`;
    const key = `slow-${randomUUID()}`;
    const original = post(url, key, { customerId: 'c', amountCents: 1 });
    await waitFor(() => entered() === 1, { what: 'the original in its handler' });
    const same = Array.from({ length: 3 }, () =>
      post(url, key, { customerId: 'c', amountCents: 1 }),
    );
    const other = Array.from({ length: 3 }, () =>
      post(url, key, { customerId: 'c', amountCents: 2 }),
    );
    await waitFor(() => arrived() === 7, { what: 'all 7 requests at the claim' });
    release();
    expect((await original).status).toBe(201);
    for (const a of await Promise.all(same)) expect(replayed(a) && a.status === 201).toBe(true);
    for (const a of await Promise.all(other)) {
      expect(a.status).toBe(422);
      expect(JSON.parse(a.body)).toMatchObject({ code: 'EO_IDEMPOTENCY_KEY_REUSED' });
    }
    expect(await effects(key)).toBe(1);
  });

  it('an original that rolls back: the waiters run afresh one at a time, once', async () => {
    const { server, entered, release, arrived } = await start(framework, 3, { failFirst: true });
    const url = `${server.url}/charges`;
    const body = { customerId: 'c', amountCents: 3 };
    const key = `slow-${randomUUID()}`;
    const original = post(url, key, body);
    await waitFor(() => entered() === 1, { what: 'the original in its handler' });
    const retries = Array.from({ length: 20 }, () => post(url, key, body));
    await waitFor(() => arrived() === 21, { what: 'all 21 requests at the claim' });
    release();
    expect((await original).status).toBe(503);
    const all = await Promise.all(retries);
    expect(all.map((a) => a.status)).toEqual(all.map(() => 201));
    expect(all.filter((a) => !replayed(a))).toHaveLength(1);
    expect(await effects(key)).toBe(1);
  });

  it('the same key in two scopes runs in each, side by side', async () => {
    const { server, entered, release } = await start(framework, 3);
    const url = `${server.url}/charges`;
    const body = { customerId: 'c', amountCents: 4 };
    const key = `slow-${randomUUID()}`;
    const a = post(url, key, body, { 'x-tenant': 'a' });
    const b = post(url, key, body, { 'x-tenant': 'b' });
    // Both handlers run at once: neither tenant waits behind the other's flight.
    await waitFor(() => entered() === 2, { what: 'both tenants in their handlers' });
    release();
    const answers = await Promise.all([a, b]);
    expect(answers.map((x) => [x.status, replayed(x)])).toEqual([
      [201, false],
      [201, false],
    ]);
    expect(await effects(key)).toBe(2);
  });

  it("a sender's concurrent redeliveries all get the stored 2xx", async () => {
    const pool = poolOf(3);
    const seen = arrivals();
    const idempotency = createIdempotency({
      pool,
      schema: db.schema,
      scope: 'hooks',
      telemetry: seen.telemetry,
      acquireTimeoutMs: 1500,
    });
    const hold = gate();
    let entered = 0;
    const webhook: WebhookOptions = {
      source: headerSource('acme', 'X-Delivery'),
      verify: (request) => request.headers.get('x-signature') === 'ok',
    };
    const app = await startApp({
      framework,
      idempotency,
      webhook,
      run: async (ctx) => {
        entered++;
        await hold.wait;
        await ctx.tx.query('INSERT INTO hooks_seen (sender, delivery) VALUES ($1, $2)', [
          'acme',
          ctx.key,
        ]);
        return { status: 200, body: { received: ctx.key } };
      },
    });
    closing.push(async () => {
      hold.open();
      await app.close();
      await idempotency.close({ timeoutMs: 1000 });
      await pool.end();
    });
    const id = randomUUID();
    const deliver = async (): Promise<Answer> =>
      answer(
        await fetch(`${app.url}/run`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-signature': 'ok', 'x-delivery': id },
          body: JSON.stringify({ event: 'paid' }),
        }),
      );
    const first = deliver();
    await waitFor(() => entered === 1, { what: 'the first delivery in its handler' });
    const redeliveries = Array.from({ length: 20 }, deliver);
    await waitFor(() => seen.count() === 21, { what: 'all 21 deliveries at the claim' });
    hold.open();
    expect((await first).status).toBe(200);
    const all = await Promise.all(redeliveries);
    expect(all.map((a) => a.status)).toEqual(all.map(() => 200));
    expect(all.filter(replayed)).toHaveLength(20);
    const { rows } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM hooks_seen WHERE delivery = $1',
      [id],
    );
    expect(rows[0]?.n).toBe(1);
  });
});
