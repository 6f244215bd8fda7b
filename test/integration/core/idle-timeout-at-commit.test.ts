/**
 * A handler that keeps the event loop busy until the server has ended its session for
 * idling in the transaction (idle_in_transaction_session_timeout, 25P03): pg has not
 * read the FATAL yet when the library sends the COMMIT round trip, so the FATAL comes
 * back as COMMIT's answer, on a dead connection. The transaction's own timeout ended
 * it, so the library settles the COMMIT's outcome by the claim's xid (`pg_xact_status`
 * on another connection): rolled back, the message's failure, an attempt spent and
 * dead-lettered at `maxAttempts`; never "outcome unknown" retried for ever. In batch
 * mode the bisection isolates it and the innocent message commits.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { migrate, type EffectivelyOnceError } from '../../../src/index.js';
import type { MemoryMessage } from '../../../src/testing/index.js';
import { blockUntilBackendGone } from '../../helpers/block-until-backend-gone.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { codesOf } from '../../helpers/manual-source.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

const IDLE_MS = 300;

let db: TestDatabase;
/** Sessions that the server ends after IDLE_MS idle in a transaction. */
let timed: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('idle_timeout_commit');
  await migrate(db.pool, { schema: db.schema });
  timed = new pg.Pool({
    connectionString: databaseUrl(),
    max: 5,
    options: `-c search_path=${db.schema} -c idle_in_transaction_session_timeout=${IDLE_MS}`,
  });
  timed.on('error', () => undefined);
});
afterAll(async () => {
  await timed.end();
  await db.close();
});

type Failure = { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };

const settled = (m: MemoryMessage<Charge>) => m.state === 'acked' || m.state === 'dead-lettered';

/** The 'slow' message's handler: holds the event loop until its session is gone. */
async function outlastSession(message: Charge, ctx: { tx: pg.PoolClient }): Promise<void> {
  if (message.id !== 'slow') return;
  const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  blockUntilBackendGone(rows[0]!.pid);
}

describe('idle_in_transaction_session_timeout whose FATAL is the answer to COMMIT', () => {
  it.each([
    ['per message', undefined],
    ['batch mode', { maxSize: 10, maxWaitMs: 20 }],
  ])('%s: attempts spent, dead-lettered (25P03)', async (mode, batch) => {
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      name: `idle-commit-${mode}`,
      pool: timed,
      maxAttempts: 2,
      ...(batch === undefined ? {} : { batch }),
      after: outlastSession,
    });
    h.consumer.on('failed', (f) => failures.push(f));
    await h.consumer.start();
    try {
      const key = `slow-${mode}`;
      const slow = h.source.send({ id: 'slow', amount: 1 }, { key });
      await waitFor(() => settled(slow) || failures.filter((f) => f.key === key).length >= 5, {
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
      // The server said why, on every attempt.
      expect(failures.every((f) => codesOf(f.error).includes('25P03'))).toBe(true);
      expect(await h.effects()).toEqual([]);
    } finally {
      await h.consumer.stop();
    }
  });

  it('batch mode: the innocent message of the batch commits, the slow one is dead-lettered', async () => {
    await db.pool.query('TRUNCATE charges');
    const h = await memoryHarness(db, {
      name: 'idle-commit-batch-mixed',
      pool: timed,
      maxAttempts: 2,
      batch: { maxSize: 10, maxWaitMs: 50 },
      after: outlastSession,
    });
    const failures: Failure[] = [];
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
