/**
 * End to end on a pool of one: an HTTP replay whose answer cannot be built (a stored row
 * whose headers `new Headers` refuses, written by hand) must end its connection once and
 * leave the next request's claim transaction alone. Had the replay handed its connection
 * to the background ROLLBACK (releaseLater) before the answer threw, the driver would
 * close it too; pg-pool's `client.release` would by then be the next checkout's, and
 * that request's claim transaction would be released from under it. Now the answer is
 * built first and never throws (a row it cannot replay is a failure of the record,
 * EO_IDEMPOTENCY_RECORD_UNREADABLE); the connection has one owner, releaseLater, and the
 * driver's close is idempotent besides.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { startPaymentServer, type PaymentServer } from '../../../kit/payments/payments.js';
import { gate, post } from './support.js';

let db: TestDatabase;
let onRollback: ((send: () => Promise<unknown>) => Promise<unknown>) | undefined;
let server: PaymentServer | undefined;
let admin: pg.Client;
const checkouts: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('attack_replay_throw', { max: 1 });
  admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  db.pool.on('release', (err: Error | null | undefined) =>
    checkouts.push(err == null ? 'release' : `release(${err.message})`),
  );
  db.pool.on('acquire', () => checkouts.push('acquire'));
  db.pool.on('connect', (client: pg.PoolClient) => {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
      const hook = onRollback;
      if (args[0] !== 'ROLLBACK' || hook === undefined) return query(...args);
      onRollback = undefined;
      return hook(() => query(...args));
    };
  });
});

afterEach(async () => {
  onRollback = undefined;
  await server?.close().catch(() => undefined);
  server = undefined;
});

afterAll(async () => {
  await admin.end();
  await db.close();
});

const body = { customerId: 'c', amountCents: 7 };

async function effects(key: string): Promise<number> {
  const { rows } = await admin.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${db.table('charges')} WHERE idem_key = $1`,
    [key],
  );
  return rows[0]?.n ?? -1;
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  for (let waited = 0; !check(); waited += 10) {
    if (waited > ms) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('a replay whose verdict throws, on a pool of one', () => {
  it('leaves the next request’s claim transaction alone', async () => {
    const next = `next-${randomUUID()}`;
    const holdNext = gate();
    let nextHeld = false;
    server = await startPaymentServer({
      framework: 'hono',
      pool: db.pool,
      schema: db.schema,
      idempotency: { acquireTimeoutMs: 5000, handlerTimeoutMs: 20_000 },
      hooks: {
        beforeEffect: async (key) => {
          if (key !== next) return;
          nextHeld = true;
          await holdNext.wait;
        },
      },
    });
    // A committed key, its stored headers then made ones `new Headers` refuses.
    const stored = randomUUID();
    expect((await post(`${server.url}/charges`, stored, body)).status).toBe(201);
    await admin.query(
      `UPDATE ${db.table('eo_idempotency_keys')} SET headers = '{"bad header name": "x"}'::jsonb WHERE idempotency_key = $1`,
      [stored],
    );

    // Its replay: the ROLLBACK releaseLater sends is held until we let it go.
    const rollback = gate();
    let rollbackOut = false;
    onRollback = async (send) => {
      rollbackOut = true;
      await rollback.wait;
      return send();
    };
    checkouts.length = 0;
    const replay = await post(`${server.url}/charges`, stored, body);
    // Answered as the record's failure, its ROLLBACK sent in the background as for any replay.
    expect(rollbackOut).toBe(true);
    expect(replay.status).toBe(500);

    // The next request gets the client (its claim queues behind the held ROLLBACK)...
    const nextAnswer = post(`${server.url}/charges`, next, body);
    await new Promise((resolve) => setTimeout(resolve, 200));
    // ...then the ROLLBACK returns, and the next request's handler runs on.
    rollback.open();
    await until(() => nextHeld);
    await new Promise((resolve) => setTimeout(resolve, 100));
    holdNext.open();
    const answered = await nextAnswer;
    expect({ status: answered.status, checkouts }).toEqual({
      status: 201,
      // replay: acquire, release (once, by releaseLater); next: acquire, release
      checkouts: ['acquire', expect.any(String), 'acquire', expect.any(String)],
    });
    expect(await effects(next)).toBe(1);
  });
});
