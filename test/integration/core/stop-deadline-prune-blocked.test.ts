import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor, within } from '../../helpers/wait-for.js';

// stop({ timeoutMs }) resolves by its deadline even while the retention pruner's DELETE
// waits on a table lock: behind a plain CREATE INDEX on the dedup table (which
// docs/keys-and-the-dedup-window.md mentions: it "holds the claims"), or any SHARE lock.
// stop() waits for the running prune only until the hard stop, then abandons it (a prune
// is idempotent and batched: the next run deletes the rest).

describe('stop() deadline with the pruner waiting on a table lock', () => {
  let db: TestDatabase;
  let locker: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase('stop_prune_lock');
    locker = new pg.Client({ connectionString: databaseUrl() });
    await locker.connect();
  });
  afterAll(async () => {
    await locker.query('ROLLBACK').catch(() => undefined);
    await locker.end();
    await db.close();
  });

  it('stop({ timeoutMs: 1000 }) resolves by its deadline', async () => {
    const source = memorySource<{ n: number }>();
    const consumer = createConsumer<{ n: number }>({
      name: 'ledger',
      source,
      pool: db.pool,
      schema: db.schema,
      retention: { olderThanMs: 60_000, intervalMs: 100 },
      handler: async () => undefined,
    });
    await consumer.start();
    source.send({ n: 1 }, { key: 'k1' });
    await waitFor(() => source.messages.every((m) => m.state === 'acked'), { what: 'acked' });

    // An operator builds an index the plain way (SHARE lock until its transaction ends).
    await locker.query('BEGIN');
    await locker.query(
      `CREATE INDEX attack_idx ON ${db.table('processed_messages')} (processed_at)`,
    );
    // The pruner's next DELETE queues behind it.
    await waitFor(
      async () =>
        (
          await db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM%' AND query LIKE $1`,
            [`%${db.schema}%`],
          )
        ).rowCount! > 0,
      { what: 'prune DELETE waiting on the lock' },
    );

    const stopped = within(
      consumer.stop({ timeoutMs: 1000 }).then(() => 'stopped' as const),
      10_000,
    );
    const result = await stopped;
    await locker.query('ROLLBACK');
    await consumer.stop();
    expect(result).toBe('stopped');
  });
});
