/**
 * The COMMIT's outcome as the runner learns it: only a connection that dies while
 * COMMIT is on the wire is unknown; a transaction the handler committed itself is
 * found out; a `ctx.tx` kept past the handler is refused.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { EffectivelyOnceError } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('commit_outcomes');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges, processed_messages, slow_commit');
});

describe('COMMIT outcomes', () => {
  it('the connection dies during COMMIT: EO_COMMIT_UNKNOWN, not acked, no attempt spent; the redelivery applies it once', async () => {
    // A deferred constraint trigger runs at COMMIT: it sleeps there while we kill the backend.
    await db.pool.query(`
      CREATE TABLE slow_commit (id int);
      CREATE FUNCTION slow_commit_fn() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$;
      CREATE CONSTRAINT TRIGGER slow_commit_trg AFTER INSERT ON slow_commit
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit_fn();`);
    const failures: EffectivelyOnceError[] = [];
    let pid: number | undefined;
    const h = await memoryHarness(db, {
      after: async (_m, ctx) => {
        if (ctx.attempt > 1 || pid !== undefined) return;
        pid = (await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        await ctx.tx.query('INSERT INTO slow_commit VALUES (1)');
      },
    });
    h.consumer.on('failed', (e) => failures.push(e.error));
    const message = h.source.send({ id: 'u', amount: 3 }, { key: 'u' });
    await h.consumer.start();
    await waitFor(
      async () =>
        pid !== undefined &&
        (
          await db.pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event = 'PgSleep'",
            [pid],
          )
        ).rowCount === 1,
      { what: 'the handler backend sleeping inside COMMIT' },
    );
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await waitFor(() => message.state === 'acked', { what: 'acked' });
    await h.consumer.stop();
    expect(failures.map((f) => f.code)).toEqual(['EO_COMMIT_UNKNOWN']);
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(await h.effects()).toEqual([{ id: 'u', amount: 3 }]);
  });

  it('ctx.tx used after the handler returned is refused with EO_TX_CONTROL', async () => {
    let late: Promise<unknown> | undefined;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const h = await memoryHarness(db, {
      after: async (_m, ctx) => {
        late = gate.then(() => ctx.tx.query('SELECT 1'));
        late.catch(() => undefined);
      },
    });
    const message = h.source.send({ id: 'l', amount: 1 }, { key: 'l' });
    await h.consumer.start();
    await waitFor(() => message.state === 'acked', { what: 'acked' });
    release();
    await expect(late).rejects.toMatchObject({ code: 'EO_TX_CONTROL' });
    await h.consumer.stop();
  });
});
