import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import {
  FRAMEWORKS,
  startPaymentServer,
  type PaymentServer,
  type PaymentServerOptions,
} from '../../helpers/http/payments.js';
import { gate, post, type Answer } from './support.js';

let db: TestDatabase;
const closing: Array<() => Promise<void>> = [];

beforeAll(async () => {
  db = await createTestDatabase('http_waiting_retries', { max: 5 });
});
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});
afterAll(async () => {
  await db.close();
});

/** A payment server on a pool of `max` connections, its original held in the handler. */
async function start(
  framework: PaymentServerOptions['framework'],
  max: number,
  idempotency: PaymentServerOptions['idempotency'] = {},
): Promise<{ server: PaymentServer; entered: Promise<void>; release: () => void }> {
  const pool = new pg.Pool({
    connectionString: databaseUrl(),
    max,
    options: `-c search_path=${db.schema}`,
  });
  pool.on('error', () => undefined);
  const entered = gate();
  const hold = gate();
  const server = await startPaymentServer({
    framework,
    pool,
    schema: db.schema,
    idempotency: { acquireTimeoutMs: 1500, retryAfterSeconds: 2, ...idempotency },
    hooks: {
      beforeEffect: async (key) => {
        if (!key.startsWith('slow-')) return;
        entered.open();
        await hold.wait;
      },
    },
  });
  closing.push(async () => {
    hold.open();
    await server.close();
    await pool.end();
  });
  return { server, entered: entered.wait, release: hold.open };
}

/** Resolves with the answers that came within `ms`; the rest stay pending. */
async function within(ms: number, answers: Array<Promise<Answer>>): Promise<Answer[]> {
  const got: Answer[] = [];
  for (const a of answers) void a.then((answer) => got.push(answer));
  await new Promise((resolve) => setTimeout(resolve, ms));
  return got;
}

describe.each(FRAMEWORKS)('%s: retries waiting on a running original are bounded', (framework) => {
  it('a burst of retries of one slow request leaves the pool to other keys', async () => {
    const { server, entered, release } = await start(framework, 3);
    const url = `${server.url}/charges`;
    const body = { customerId: 'c', amountCents: 100 };
    const key = `slow-${randomUUID()}`;
    const original = post(url, key, body);
    await entered;
    const retries = Array.from({ length: 8 }, () => post(url, key, body));
    // Past the bound (one waiter per key) a retry is answered at once.
    const early = await within(400, retries);
    expect(early.length).toBe(7);
    for (const answer of early) {
      expect(answer.status).toBe(409);
      expect(answer.headers['retry-after']).toBe('2');
      expect(JSON.parse(answer.body)).toMatchObject({ code: 'EO_CLAIM_BUSY' });
    }
    // Another key still gets a connection while the original and its one waiter hold two.
    const other = await post(url, randomUUID(), body);
    expect(other.status).toBe(201);
    release();
    const first = await original;
    expect(first.status).toBe(201);
    const all = await Promise.all(retries);
    const waited = all.filter((a) => a.status !== 409);
    expect(waited).toHaveLength(1);
    expect(waited[0]).toMatchObject({ status: 201, body: first.body });
    expect(server.idempotency.stats().busy).toBe(7);
  });

  it('maxWaitersPerKey and maxWaiters are configurable', async () => {
    const { server, entered, release } = await start(framework, 6, {
      maxWaitersPerKey: 3,
      maxWaiters: 2,
    });
    const url = `${server.url}/charges`;
    const body = { customerId: 'c', amountCents: 1 };
    const key = `slow-${randomUUID()}`;
    const original = post(url, key, body);
    await entered;
    const retries = Array.from({ length: 5 }, () => post(url, key, body));
    // Three may wait per key, but only two in all.
    const early = await within(400, retries);
    expect(early.map((a) => a.status)).toEqual([409, 409, 409]);
    release();
    expect((await original).status).toBe(201);
    expect((await Promise.all(retries)).filter((a) => a.status === 201)).toHaveLength(2);
  });
});
