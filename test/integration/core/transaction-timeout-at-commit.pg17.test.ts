/**
 * Postgres 17+ (`transaction_timeout`, 25P04): jest.config.js runs this file only under
 * EO_PG_VERSION=17 or later (.ci/run's Postgres 18 pass), and it fails, not skips, on an
 * older server. A slow deferred constraint trigger makes the timeout fire inside COMMIT
 * on every attempt: the server ends the session with FATAL 25P04 as COMMIT's answer.
 * The library settles the outcome by the claim's xid (`pg_xact_status`): rolled back,
 * the message's own failure, an attempt spent and dead-lettered at `maxAttempts`;
 * never "outcome unknown" retried for ever. In batch mode the bisection isolates it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { migrate, type EffectivelyOnceError } from '../../../src/index.js';
import type { MemoryMessage } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { codesOf } from '../../helpers/manual-source.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

const TIMEOUT_MS = 500;

let db: TestDatabase;
/** Sessions whose transactions the server ends after TIMEOUT_MS. */
let timed: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('tx_timeout_commit');
  const { rows } = await db.pool.query<{ v: string }>(
    "SELECT current_setting('server_version_num') AS v",
  );
  if (Number(rows[0]!.v) < 170000)
    throw new Error(`needs Postgres 17+ (transaction_timeout), got ${rows[0]!.v}`);
  await migrate(db.pool, { schema: db.schema });
  await db.pool.query('CREATE TABLE IF NOT EXISTS charges (id text NOT NULL, amount int NOT NULL)');
  // A slow deferred check on the 'slow' message's row: it runs inside COMMIT.
  await db.pool.query(`
    CREATE OR REPLACE FUNCTION slow_check() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.id = 'slow' THEN PERFORM pg_sleep(${(TIMEOUT_MS * 4) / 1000}); END IF;
      RETURN NULL;
    END $$`);
  await db.pool.query(`
    CREATE CONSTRAINT TRIGGER charges_slow_check AFTER INSERT ON charges
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_check()`);
  timed = new pg.Pool({
    connectionString: databaseUrl(),
    max: 5,
    options: `-c search_path=${db.schema} -c transaction_timeout=${TIMEOUT_MS}`,
  });
  timed.on('error', () => undefined);
});
afterAll(async () => {
  await timed?.end();
  await db.close();
});

type Failure = { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };

const settled = (m: MemoryMessage<Charge>) => m.state === 'acked' || m.state === 'dead-lettered';

describe('transaction_timeout fires during COMMIT (a slow deferred constraint trigger)', () => {
  it.each([
    ['per message', undefined],
    ['batch mode', { maxSize: 10, maxWaitMs: 20 }],
  ])('%s: attempts spent, dead-lettered (25P04)', async (mode, batch) => {
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      name: `txto-commit-${mode}`,
      pool: timed,
      maxAttempts: 2,
      ...(batch === undefined ? {} : { batch }),
    });
    h.consumer.on('failed', (f) => failures.push(f));
    await h.consumer.start();
    try {
      const key = `slow-${mode}`;
      const slow = h.source.send({ id: 'slow', amount: 1 }, { key });
      await waitFor(() => settled(slow) || failures.filter((f) => f.key === key).length >= 4, {
        timeoutMs: 60_000,
        what: 'settled or looping',
      });
      expect({
        state: slow.state,
        seen: failures.map((f) => `${f.attempt}:${String(f.willRetry)}:${f.error.code}`),
      }).toEqual({
        state: 'dead-lettered',
        seen: ['1:true:EO_TX_ABORTED', '2:false:EO_TX_ABORTED'],
      });
      expect(failures.every((f) => codesOf(f.error).includes('25P04'))).toBe(true);
      expect(await h.effects()).toEqual([]);
    } finally {
      await h.consumer.stop();
    }
  });

  it('batch mode: the innocent message of the batch commits, the slow one is dead-lettered', async () => {
    await db.pool.query('TRUNCATE charges');
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      name: 'txto-commit-batch-mixed',
      pool: timed,
      maxAttempts: 2,
      batch: { maxSize: 10, maxWaitMs: 50 },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    const fast = h.source.send({ id: 'fast', amount: 1 }, { key: 'mixed-fast' });
    const slow = h.source.send({ id: 'slow', amount: 1 }, { key: 'mixed-slow' });
    await h.consumer.start();
    try {
      await waitFor(
        () =>
          (settled(fast) && settled(slow)) ||
          failures.length >= 8,
        { timeoutMs: 60_000, what: 'both settled, or looping' },
      );
      expect({ fast: fast.state, slow: slow.state }).toEqual({
        fast: 'acked',
        slow: 'dead-lettered',
      });
      expect((await h.effects()).map((e) => e.id)).toEqual(['fast']);
    } finally {
      await h.consumer.stop();
    }
  });
});
