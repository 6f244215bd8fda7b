/**
 * Nothing the library runs leaves session state behind on a server connection: through
 * PgBouncer in transaction mode that connection serves another client next, which would
 * inherit it (a session advisory lock would be held for ever by an idle session, and
 * released by nobody). Migrations of every family, run by several migrators at once on a
 * fresh schema, the consumer's claims and ordered outbox enqueues all run here through
 * PgBouncer; then, on a direct connection, no idle session of this file's role holds an
 * advisory lock.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { migrate } from '../../../src/index.js';
import { migrateKeyTable } from '../../../src/http/index.js';
import { enqueue, migrateOutbox } from '../../../src/outbox/index.js';
import { createTestDatabase, directDatabaseUrl, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('pgbouncer_session_state');
});
afterAll(async () => db.close());

/** Advisory locks held by sessions of `role` that are not in a transaction. */
async function idleAdvisoryLocks(role: string): Promise<number> {
  const admin = new pg.Client({ connectionString: directDatabaseUrl() });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND a.usename = $1 AND a.xact_start IS NULL`,
      [role],
    );
    return rows[0]!.n;
  } finally {
    await admin.end();
  }
}

describe('session state through PgBouncer', () => {
  it('migrations, claims and ordered enqueues leave no advisory lock on an idle session', async () => {
    const schema = db.schema;
    const migrations = await Promise.allSettled(
      Array.from({ length: 3 }, () => [
        migrate(db.pool, { schema }),
        migrateKeyTable(db.pool, { schema }),
        migrateOutbox(db.pool, { schema }),
      ]).flat(),
    );
    expect(migrations.filter((m) => m.status === 'rejected')).toEqual([]);

    const h = await memoryHarness(db, { concurrency: 4 });
    const messages = Array.from({ length: 8 }, (_, i) =>
      h.source.send({ id: `m${i}`, amount: i }, { key: `k${i}` }),
    );
    await h.consumer.start();
    await waitFor(() => messages.every((m) => m.state === 'acked'), { what: 'all acked' });
    await h.consumer.stop();

    for (let i = 0; i < 4; i++) {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        await enqueue(
          client,
          { destination: 'effects', orderingKey: 'one', payload: { i } },
          { schema },
        );
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    }

    expect(await h.effects()).toHaveLength(8);
    expect(await idleAdvisoryLocks(db.schema)).toBe(0);
  });
});
