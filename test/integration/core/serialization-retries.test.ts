/**
 * Issue 11: the new `isolationLevel` and `serializationRetries` options. A
 * serialization failure retried in place spends no delivery attempt and is counted
 * in `stats().serializationRetries`; once the budget is spent the delivery fails like
 * a handler failure. (Needs the new options: does not typecheck before the fix.)
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { MemoryMessage } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { codesOf } from '../../helpers/manual-source.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('serialization_retries');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges, processed_messages, counter');
  await db.pool.query('DROP FUNCTION IF EXISTS refuse_claim()');
  await db.pool.query(
    'CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL); INSERT INTO counter VALUES (1, 0)',
  );
});

const settled = (m: MemoryMessage<Charge>) => m.state === 'acked' || m.state === 'dead-lettered';

/**
 * Runs after the handler's insert: while `collide(call)` says so, a concurrent
 * transaction commits an update of the row first, so this one's update fails with 40001
 * (repeatable read and serializable both refuse it).
 */
function updateCounter(calls: number[], collide: (call: number) => boolean) {
  return async (
    _m: Charge,
    ctx: { tx: { query: (sql: string) => Promise<unknown> }; attempt: number },
  ) => {
    calls.push(ctx.attempt);
    if (collide(calls.length)) await db.pool.query('UPDATE counter SET n = n + 1 WHERE id = 1');
    await ctx.tx.query('UPDATE counter SET n = n + 10 WHERE id = 1');
  };
}

async function counter(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT n FROM counter WHERE id = 1');
  return rows[0]!.n;
}

describe('isolationLevel', () => {
  it.each([
    ['repeatable read', 'repeatable read'],
    ['serializable', 'serializable'],
    [undefined, 'read committed'],
  ] as const)('%s: the claim transaction runs at %s', async (level, expected) => {
    const seen: string[] = [];
    const h = await memoryHarness(db, {
      ...(level === undefined ? {} : { isolationLevel: level }),
      before: async (_m, ctx) => {
        const { rows } = await ctx.tx.query<{ transaction_isolation: string }>(
          'SHOW transaction_isolation',
        );
        seen.push(rows[0]!.transaction_isolation);
      },
    });
    const message = h.source.send({ id: 'iso', amount: 1 }, { key: `iso-${level}` });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(seen).toEqual([expected]);
    expect(message.outcomes).toEqual(['processed']);
  });
});

describe('serializationRetries', () => {
  it('a 40001 under repeatable read is retried in place and counted in stats().serializationRetries', async () => {
    const calls: number[] = [];
    const h = await memoryHarness(db, {
      isolationLevel: 'repeatable read',
      after: updateCounter(calls, (call) => call === 1),
    });
    const message = h.source.send({ id: 'rr', amount: 2 }, { key: 'rr' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(calls).toEqual([1, 1]);
    expect(message.outcomes).toEqual(['processed']);
    expect(h.consumer.stats().serializationRetries).toBe(1);
    expect(h.consumer.stats().processed).toBe(1);
    expect(await counter()).toBe(11);
    expect(await h.effects()).toEqual([{ id: 'rr', amount: 2 }]);
  });

  it('once the budget is spent, the delivery fails like a handler failure: one attempt each time, dead-lettered after maxAttempts', async () => {
    const calls: number[] = [];
    const h = await memoryHarness(db, {
      isolationLevel: 'repeatable read',
      serializationRetries: 2,
      maxAttempts: 2,
      after: updateCounter(calls, () => true),
    });
    const message = h.source.send({ id: 'ex', amount: 3 }, { key: 'ex' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message) || calls.length >= 12, {
        timeoutMs: 30_000,
        what: 'settled or looping',
      });
    } finally {
      await h.consumer.stop();
    }
    // Each delivery: the first run and two in-place retries, all at that delivery's attempt.
    expect(calls).toEqual([1, 1, 1, 2, 2, 2]);
    expect(message.state).toBe('dead-lettered');
    expect(message.outcomes).toEqual(['retry', 'dead-lettered']);
    expect(codesOf(message.deadLetterReason)).toContain('40001');
    expect(h.consumer.stats().serializationRetries).toBe(4);
    expect(await h.effects()).toEqual([]);
    expect(await counter()).toBe(6); // only the concurrent updates committed
  });

  it('serializationRetries: 0 spends an attempt on the first serialization failure', async () => {
    const calls: number[] = [];
    const h = await memoryHarness(db, {
      isolationLevel: 'serializable',
      serializationRetries: 0,
      maxAttempts: 3,
      after: updateCounter(calls, (call) => call === 1),
    });
    const message = h.source.send({ id: 'zero', amount: 4 }, { key: 'zero' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(calls).toEqual([1, 2]);
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(h.consumer.stats().serializationRetries).toBe(0);
    expect(await counter()).toBe(11);
  });

  it.each([
    ['per message', {}],
    ['batch mode', { batch: { maxSize: 10, maxWaitMs: 5 } }],
  ])(
    '%s: a claim that keeps losing (40001 from the claim statement) also fails like a handler error past the budget',
    async (_mode, extra) => {
      const failures: boolean[] = [];
      const h = await memoryHarness(db, { ...extra, serializationRetries: 1, maxAttempts: 2 });
      await h.consumer.start();
      // The claim's own INSERT loses a serialization race every time it runs.
      await db.pool.query(`
        CREATE FUNCTION refuse_claim() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.message_key = 'lost-race' THEN
            RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001';
          END IF;
          RETURN NEW;
        END $$;
        CREATE TRIGGER refuse_claim BEFORE INSERT ON processed_messages
          FOR EACH ROW EXECUTE FUNCTION refuse_claim()`);
      h.consumer.on('failed', (f) => failures.push(f.willRetry));
      const message = h.source.send({ id: 'race', amount: 5 }, { key: 'lost-race' });
      try {
        await waitFor(() => settled(message) || failures.length >= 6, {
          timeoutMs: 30_000,
          what: 'settled or looping',
        });
      } finally {
        await h.consumer.stop();
      }
      expect(message.state).toBe('dead-lettered');
      expect(message.outcomes).toEqual(['retry', 'dead-lettered']);
      expect(failures).toEqual([true, false]);
      expect(codesOf(message.deadLetterReason)).toContain('40001');
      expect(h.consumer.stats().serializationRetries).toBe(2);
    },
  );
});
