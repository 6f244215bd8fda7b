/**
 * Attack (pre-existing, since ed788f8, kept by the driver merge): a replay's connection
 * is meant to go back to the pool once its ROLLBACK returned (Engine.releaseLater). It
 * runs `conn.untilHardStop(conn.rollback())`; `rollback()` resolves `undefined`, which
 * untilHardStop reads as "given up on at the hard stop": it abandons the connection
 * (marked broken, a CancelRequest sent to its backend) and close() destroys it. Every
 * replay costs a connection and a cancel, with no hard stop anywhere.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { startPaymentServer } from '../../../kit/payments/payments.js';
import { post } from './support.js';

let db: TestDatabase;
const released: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('attack_replay_release', { max: 1 });
  db.pool.on('release', (err: Error | null | undefined) =>
    released.push(err == null ? 'ok' : `error: ${err.message}`),
  );
});

afterAll(async () => db.close());

describe('a replay on a healthy database, no shutdown', () => {
  it('returns its connection to the pool, not destroyed', async () => {
    const server = await startPaymentServer({
      framework: 'hono',
      pool: db.pool,
      schema: db.schema,
    });
    try {
      const key = randomUUID();
      const body = { customerId: 'c', amountCents: 7 };
      expect((await post(`${server.url}/charges`, key, body)).status).toBe(201);
      released.length = 0;
      const again = await post(`${server.url}/charges`, key, body);
      expect(again.headers['idempotent-replayed']).toBe('true');
      for (let i = 0; i < 100 && released.length === 0; i++)
        await new Promise((resolve) => setTimeout(resolve, 10));
      expect(released).toEqual(['ok']);
    } finally {
      await server.close();
    }
  });
});
