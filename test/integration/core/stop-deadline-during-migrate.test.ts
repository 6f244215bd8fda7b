import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer, StateError } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor, within } from '../../helpers/wait-for.js';

// `migrate` adopts a dedup table its ledger does not record (step 1 runs again): its
// `CREATE INDEX IF NOT EXISTS` takes the table's SHARE lock even though the index
// exists, so it queues behind any open transaction on the table (another instance's
// claim whose handler is running). stop({ timeoutMs }) called meanwhile must still
// resolve by its deadline: start() is abandoned (it rejects with a StateError) and the
// migrating backend cancelled, not left queued.

describe('stop() deadline while start() migrates behind an open transaction', () => {
  let db: TestDatabase;
  let other: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase('stop_during_migrate');
    other = new pg.Client({
      connectionString: databaseUrl(),
      options: `-c search_path=${db.schema}`,
    });
    await other.connect();
  });
  afterAll(async () => {
    await other.query('ROLLBACK').catch(() => undefined);
    await other.end();
    await db.close();
  });

  it('stop({ timeoutMs: 1000 }) resolves by its deadline', async () => {
    const options = {
      name: 'pay',
      pool: db.pool,
      schema: db.schema,
      handler: async () => undefined,
    };
    // The table with no ledger rows: step 1 applies again.
    const first = createConsumer<{ n: number }>({ ...options, source: memorySource() });
    await first.start();
    await first.stop();
    await db.pool.query('DELETE FROM effectively_once_migrations');
    // Another instance's claim, its handler still running.
    await other.query('BEGIN');
    await other.query(
      `INSERT INTO processed_messages (consumer, message_key) VALUES ('pay', 'k-old')`,
    );

    const handled: number[] = [];
    const source = memorySource<{ n: number }>();
    source.send({ n: 1 });
    const upgraded = createConsumer<{ n: number }>({
      ...options,
      source,
      handler: async (body) => {
        handled.push(body.n);
      },
    });
    const starting = upgraded.start().catch((e: unknown) => e);
    await waitFor(
      async () =>
        (
          await db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND (query LIKE '%ALTER TABLE%' OR query LIKE '%CREATE INDEX%') AND query LIKE $1`,
            [`%${db.schema}%`],
          )
        ).rowCount! > 0,
      { what: 'the migration waiting on the table lock' },
    );
    const result = await within(
      upgraded.stop({ timeoutMs: 1000 }).then(() => 'stopped' as const),
      8000,
    );
    // The abandoned migration must not stay queued for the lock, stalling every claim.
    const stillWaiting = (
      await db.pool.query(
        `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND (query LIKE '%ALTER TABLE%' OR query LIKE '%CREATE INDEX%') AND query LIKE $1`,
        [`%${db.schema}%`],
      )
    ).rowCount;
    await other.query('ROLLBACK');
    const outcome = await starting;
    await upgraded.stop();
    expect(result).toBe('stopped');
    expect(outcome).toBeInstanceOf(StateError);
    expect(stillWaiting).toBe(0);
    // Abandoned, not resumed: the source never ran, even once the lock was free.
    expect(handled).toEqual([]);
    expect(
      (
        await db.pool.query(
          `SELECT 1 FROM processed_messages WHERE consumer = 'pay' AND message_key <> 'k-old'`,
        )
      ).rowCount,
    ).toBe(0);
  });
});
