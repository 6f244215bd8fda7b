import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor, within } from '../../helpers/wait-for.js';

// The upgrade this round documents: `migrate` adds `expires_at` to an existing dedup
// table (ALTER TABLE ... ADD COLUMN IF NOT EXISTS). The ALTER needs an ACCESS EXCLUSIVE
// lock and runs without a lock_timeout, so it queues behind any open transaction on the
// table, like the CREATE INDEX IF NOT EXISTS before it (an old instance's claim whose handler is running, a report). stop({ timeoutMs })
// called meanwhile first awaits the start() still migrating (consumer.ts shutdown():
// `await this.starting` comes before the deadline's timer is even set), so it does not
// resolve by its deadline; it waits for as long as the other transaction stays open.

describe('attack: stop() deadline while start() migrates behind an open transaction', () => {
  let db: TestDatabase;
  let other: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase('attack_stop_migrate');
    other = new pg.Client({ connectionString: databaseUrl(), options: `-c search_path=${db.schema}` });
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
    // The table as an earlier version made it: without expires_at.
    const first = createConsumer<{ n: number }>({ ...options, source: memorySource() });
    await first.start();
    await first.stop();
    await db.pool.query('ALTER TABLE processed_messages DROP COLUMN expires_at');
    // An old instance's claim, its handler still running.
    await other.query('BEGIN');
    await other.query(`INSERT INTO processed_messages (consumer, message_key) VALUES ('pay', 'k-old')`);

    const upgraded = createConsumer<{ n: number }>({ ...options, source: memorySource() });
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
    await other.query('ROLLBACK');
    await starting;
    await upgraded.stop();
    expect(result).toBe('stopped');
  });
});
