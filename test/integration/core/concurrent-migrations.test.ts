/**
 * Two processes migrating one table family at once: the one that waited for the
 * advisory lock must see what the other created and run no DDL (a second
 * `CREATE INDEX IF NOT EXISTS` takes the table's lock anyway and queues behind every
 * open claim, and every claim after it queues behind it).
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { idempotencyKeyTables } from '../../../src/http/store.js';
import { dedupTables, MIGRATION_LOCK_KEY } from '../../../src/store/migrate.js';
import type { TableFamily } from '../../../src/store/table-family.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('concurrent_migrations');
});
afterAll(async () => db.close());

async function advisoryWaiters(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_locks
      WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`,
    [MIGRATION_LOCK_KEY],
  );
  return rows[0]!.n;
}

it.each([
  ['the dedup table', dedupTables, 'dedup_both_at_once'],
  ['the HTTP key table', idempotencyKeyTables, 'keys_both_at_once'],
])(
  '%s: one of two concurrent migrations creates it, the other finds it present',
  async (_name, family: TableFamily, table) => {
    const ref = { schema: db.schema, table };
    // Both migrations get past their first look and queue for the lock held here.
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const both = [family.migrate(db.pool, ref), family.migrate(db.pool, ref)];
      await waitFor(async () => (await advisoryWaiters()) === 2, {
        what: 'both migrations waiting for the lock',
      });
      await holder.query('COMMIT');
      expect((await Promise.all(both)).sort()).toEqual(['created', 'present']);
    } finally {
      holder.release();
    }
  },
);
