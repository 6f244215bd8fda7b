/**
 * A replay answered before its ROLLBACK returns (replay-release.test.ts) must still
 * leave its connection fit for the next request, on a pool of one connection: while
 * its ROLLBACK is out nobody else gets it; if its backend dies or its ROLLBACK fails,
 * it is destroyed rather than handed to the next request inside the old transaction.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { startPaymentServer, type PaymentServer } from '../../../kit/payments/payments.js';
import { within } from '../../helpers/wait-for.js';
import { gate, post } from './support.js';

let db: TestDatabase;
/** What the next ROLLBACK does instead of going out at once (then cleared). */
let onRollback:
  ((client: pg.PoolClient, send: () => Promise<unknown>) => Promise<unknown>) | undefined;
let server: PaymentServer | undefined;
/** A connection of its own: the pool's one may be held on purpose. */
let admin: pg.Client;

beforeAll(async () => {
  db = await createTestDatabase('http_replay_faults', { max: 1 });
  admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  db.pool.on('connect', (client: pg.PoolClient) => {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
      const hook = onRollback;
      if (args[0] !== 'ROLLBACK' || hook === undefined) return query(...args);
      onRollback = undefined;
      return hook(client, () => query(...args));
    };
  });
});

afterEach(async () => {
  onRollback = undefined;
  await server?.close();
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

/** Waits until no connection of the pool is checked out. */
async function allBack(): Promise<void> {
  for (let i = 0; i < 100 && db.pool.totalCount - db.pool.idleCount > 0; i++)
    await new Promise((resolve) => setTimeout(resolve, 20));
  expect(db.pool.totalCount - db.pool.idleCount).toBe(0);
}

/**
 * A committed key, then (unless `replay` is false) its replay, answered while the
 * ROLLBACK does what `hook` says.
 */
async function replayWith(
  hook: (client: pg.PoolClient, send: () => Promise<unknown>) => Promise<unknown>,
  key = randomUUID(),
  replay = true,
): Promise<void> {
  server = await startPaymentServer({
    framework: 'hono',
    pool: db.pool,
    schema: db.schema,
    idempotency: { acquireTimeoutMs: 5000 },
  });
  const first = await post(`${server.url}/charges`, key, body);
  expect(first.status).toBe(201);
  onRollback = hook;
  if (!replay) return;
  const again = await post(`${server.url}/charges`, key, body);
  expect(again.status).toBe(201);
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect(again.body).toBe(first.body);
}

describe('a replay answered before its ROLLBACK, on a pool of one', () => {
  it('keeps the connection from the next request until the ROLLBACK returned', async () => {
    const release = gate();
    let pid: number | undefined;
    await replayWith(async (client, send) => {
      pid = (client as unknown as { processID: number }).processID;
      await release.wait;
      return send();
    });
    const key = randomUUID();
    let settled = false;
    const next = post(`${server!.url}/charges`, key, body).finally(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Not run on the replay's connection while its transaction is open.
    expect(settled).toBe(false);
    expect(await effects(key)).toBe(0);
    release.open();
    const answered = await next;
    expect(answered.status).toBe(201);
    expect(await effects(key)).toBe(1);
    expect(pid).toBeDefined();
    await allBack();
  });

  it('destroys the connection whose backend was terminated during the ROLLBACK', async () => {
    await replayWith(async (client, send) => {
      const pid = (client as unknown as { processID: number }).processID;
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await new Promise((resolve) => setTimeout(resolve, 100));
      return send();
    });
    await allBack();
    const key = randomUUID();
    const next = await post(`${server!.url}/charges`, key, body);
    expect(next.status).toBe(201);
    expect(await effects(key)).toBe(1);
  });

  it('destroys the connection whose ROLLBACK failed, not handing over its transaction', async () => {
    // The ROLLBACK fails with a server ERROR and the transaction is still there (here:
    // aborted by the statement that raised it). Reused, the next request's claim would
    // meet "current transaction is aborted" (25P02) and be answered 503.
    await replayWith(async (_client, send) => {
      const failing = await (
        _client.query.bind(_client) as unknown as (sql: string) => Promise<unknown>
      )('SELECT 1/0').then(
        () => undefined,
        (error: unknown) => error,
      );
      void send;
      throw failing;
    });
    await allBack();
    const key = randomUUID();
    const next = await post(`${server!.url}/charges`, key, body);
    expect(next.status).toBe(201);
    expect(await effects(key)).toBe(1);
  });

  it('a ROLLBACK that never returns keeps close() no longer than its hard stop', async () => {
    // A stalled socket: the replay was answered, its ROLLBACK never comes back.
    await replayWith(() => new Promise<never>(() => undefined));
    expect(await within(server!.idempotency.close({ timeoutMs: 50 }), 10_000)).toBeUndefined();
    // Abandoned at the hard stop: the connection is destroyed, not handed back mid-transaction.
    await allBack();
  });
});

describe('a key reused with another request, answered before its ROLLBACK', () => {
  it('is refused 422 with the ROLLBACK held, and another tenant still runs afresh', async () => {
    const release = gate();
    let held = 0;
    const key = randomUUID();
    await replayWith(
      async (_client, send) => {
        held++;
        await release.wait;
        return send();
      },
      key,
      false,
    );
    const refused = await post(`${server!.url}/charges`, key, { ...body, amountCents: 8 });
    expect(refused.status).toBe(422);
    expect(held).toBe(1);
    release.open();
    await allBack();
    const other = await post(`${server!.url}/charges`, key, body, { 'x-tenant': 't1' });
    expect(other.status).toBe(201);
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    expect(JSON.parse(other.body)).toMatchObject({ tenant: 't1', key });
    expect(await effects(key)).toBe(2);
  });
});
