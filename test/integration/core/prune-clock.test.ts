/**
 * Issue 11: `prune(pool, { olderThan: ms })` measures the window with the database's
 * clock (`now()`, which also stamps `processed_at`), so an application host whose
 * clock is off neither deletes keys still inside the window nor keeps stale ones.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { migrate, prune } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('prune_clock');
  await migrate(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());
beforeEach(async () => {
  // Stamped by the database: one key 10 minutes old, one 2 hours old.
  await db.pool.query(`
    TRUNCATE processed_messages;
    INSERT INTO processed_messages (consumer, message_key, processed_at) VALUES
      ('c', 'recent', now() - interval '10 minutes'),
      ('c', 'stale', now() - interval '2 hours')`);
});

const HOUR = 3600_000;

async function keys(): Promise<string[]> {
  const { rows } = await db.pool.query<{ k: string }>(
    'SELECT message_key AS k FROM processed_messages ORDER BY 1',
  );
  return rows.map((r) => r.k);
}

/** Runs `fn` with the application's clock (`Date.now`) off by `skewMs`. */
async function withAppClockOff<T>(skewMs: number, fn: () => Promise<T>): Promise<T> {
  const real = Date.now();
  const spy = jest.spyOn(Date, 'now').mockImplementation(() => real + skewMs);
  try {
    return await fn();
  } finally {
    spy.mockRestore();
  }
}

describe('prune cutoff', () => {
  it.each([
    ['an hour fast', HOUR],
    ['three hours slow', -3 * HOUR],
  ])(
    'olderThan in ms, app clock %s: only the key older than the window by the database clock is deleted',
    async (_what, skew) => {
      const deleted = await withAppClockOff(skew, () =>
        prune(db.pool, { olderThan: 30 * 60_000, schema: db.schema }),
      );
      expect(await keys()).toEqual(['recent']);
      expect(deleted).toBe(1);
    },
  );

  it('a Date passed as olderThan is used as given', async () => {
    const { rows } = await db.pool.query<{ cutoff: Date }>(
      "SELECT now() - interval '5 minutes' AS cutoff",
    );
    const deleted = await withAppClockOff(HOUR, () =>
      prune(db.pool, { olderThan: rows[0]!.cutoff, schema: db.schema }),
    );
    expect(deleted).toBe(2);
    expect(await keys()).toEqual([]);
  });
});
