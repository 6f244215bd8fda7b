/**
 * A COMMIT that does not end: a deferred foreign key whose check, run by COMMIT, waits
 * for a lock another session holds on the parent row (a long admin transaction, a
 * stuck job). The handler returned long ago; `stop()` must still resolve after its
 * grace period, never ack the delivery (the COMMIT's outcome is not known), and leave
 * the key to a redelivery.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { sleep, waitFor, within } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('commit_stuck');
  await db.pool.query(`
    CREATE TABLE parent (id text PRIMARY KEY);
    CREATE TABLE child (id text PRIMARY KEY,
      parent_id text NOT NULL REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
    INSERT INTO parent VALUES ('p1')`);
});
afterAll(async () => db.close());

describe.each([
  ['per message', {}],
  ['batch mode', { batch: { maxSize: 10, maxWaitMs: 5 } }],
])('%s: a COMMIT whose deferred check waits on a lock', (mode, extra) => {
  it('stop() resolves after its grace period; the delivery is never acked', async () => {
    const locker = await db.pool.connect();
    let released = false;
    const unlock = async (): Promise<void> => {
      if (released) return;
      released = true;
      await locker.query('ROLLBACK').catch(() => undefined);
      locker.release();
    };
    try {
      await locker.query("BEGIN; SELECT * FROM parent WHERE id = 'p1' FOR UPDATE");
      let returned = false;
      const h = await memoryHarness(db, {
        ...extra,
        name: `commit-stuck-${mode}`,
        handlerTimeoutMs: 500,
        after: async (m, ctx) => {
          await ctx.tx.query('INSERT INTO child (id, parent_id) VALUES ($1, $2)', [m.id, 'p1']);
          returned = true;
        },
      });
      const key = `stuck ${mode}`;
      const message = h.source.send({ id: key, amount: 1 }, { key });
      await h.consumer.start();
      await waitFor(() => returned, { what: 'the handler returned' });
      // The COMMIT is now waiting for the lock: past the handler's timeout, stop() gives up on it.
      await sleep(700);
      expect(await within(h.consumer.stop({ timeoutMs: 200 }), 15_000)).not.toBe('hung');
      expect(message.state).not.toBe('acked');
      await unlock();
      // Whatever the abandoned COMMIT did, a redelivery settles it: applied exactly once then.
      const rows = await db.pool.query('SELECT id FROM child WHERE id = $1', [key]);
      expect(rows.rowCount).toBeLessThanOrEqual(1);
    } finally {
      await unlock();
    }
  });
});
