/**
 * A replay is answered as soon as the stored response is read: its transaction wrote
 * nothing and its ROLLBACK cannot change the answer, so the round trip is not waited
 * for (issue 24). The connection still goes back to the pool only after the ROLLBACK,
 * and close() waits for it.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { FRAMEWORKS, startPaymentServer } from '../../../kit/payments/payments.js';
import { gate, post } from './support.js';

let db: TestDatabase;
/** While set, every ROLLBACK waits for it (counted in `held`). */
let rollbacks: { wait: Promise<void>; held: number } | undefined;

beforeAll(async () => {
  db = await createTestDatabase('http_replay_release', { max: 10 });
  db.pool.on('connect', (client: pg.PoolClient) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args) => {
      const hold = rollbacks;
      if (args[0] !== 'ROLLBACK' || hold === undefined) return query(...args);
      hold.held++;
      return hold.wait.then(() => query(...args));
    };
  });
});

afterAll(async () => {
  await db.close();
});

function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  void promise.then(
    () => (done = true),
    () => (done = true),
  );
  return new Promise((resolve) => setTimeout(() => resolve(done), 200));
}

describe.each(FRAMEWORKS)('%s: a replay', (framework) => {
  it('is answered before its ROLLBACK returns; the connection and close() wait for it', async () => {
    const server = await startPaymentServer({ framework, pool: db.pool, schema: db.schema });
    const key = randomUUID();
    const body = { customerId: 'c', amountCents: 7 };
    const first = await post(`${server.url}/charges`, key, body);
    expect(first.status).toBe(201);

    const release = gate();
    rollbacks = { wait: release.wait, held: 0 };
    try {
      let timer: NodeJS.Timeout | undefined;
      const replay = await Promise.race([
        post(`${server.url}/charges`, key, body),
        new Promise<'no answer'>((resolve) => (timer = setTimeout(resolve, 3000, 'no answer'))),
      ]).finally(() => clearTimeout(timer));
      expect(replay).not.toBe('no answer');
      if (replay === 'no answer') return;
      expect(replay.status).toBe(201);
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.body).toBe(first.body);
      // Answered while its ROLLBACK was still held: its connection is still out.
      expect(rollbacks.held).toBe(1);
      expect(db.pool.totalCount - db.pool.idleCount).toBe(1);

      const closing = server.close();
      expect(await settled(closing)).toBe(false);
      release.open();
      await closing;
      expect(db.pool.totalCount - db.pool.idleCount).toBe(0);
    } finally {
      release.open();
      rollbacks = undefined;
    }
  });
});
