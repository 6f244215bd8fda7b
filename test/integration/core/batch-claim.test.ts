import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { migrate } from '../../../src/index.js';
import { payloadHash } from '../../../src/consumer/hash.js';
import { BatchClaimStatements } from '../../../src/store/batch-claim.js';
import { pgClaimSession } from '../../../src/tx/claim-connection.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('batch_claim');
  await migrate(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());

// Keys that break naive array literals or SQL quoting: quotes, backslashes, braces,
// commas, the word NULL, whitespace, unicode, a near-limit length.
const HOSTILE = [
  `it's`,
  'back\\slash',
  '"double"',
  '{braces}',
  'a,b',
  'NULL',
  'null',
  ' padded ',
  "'); DROP TABLE processed_messages; --",
  '\\x00ff',
  'ünïcødé ✓ 🔑',
  "E'\\\\",
  'x'.repeat(1500),
];

describe('batch claim (one simple-protocol round trip)', () => {
  it('stores every key and hash exactly as given, and reports only new keys as claimed', async () => {
    const claims = new BatchClaimStatements(
      { schema: db.schema, table: 'processed_messages' },
      undefined,
    );
    const items = HOSTILE.map((key, i) => ({
      key,
      hash: i % 4 === 0 ? null : payloadHash(`payload-${i}`, undefined),
    }));
    const client = await db.pool.connect();
    try {
      const first = await claims.begin(pgClaimSession(client), 'hostile', items, 1000);
      await client.query('COMMIT');
      expect([...first.claimed].sort()).toEqual([...HOSTILE].sort());

      const again = await claims.begin(
        pgClaimSession(client),
        'hostile',
        [...items.slice(0, 3), { key: 'fresh', hash: null }],
        1000,
      );
      await client.query('COMMIT');
      expect([...again.claimed]).toEqual(['fresh']);
    } finally {
      client.release();
    }
    const { rows } = await db.pool.query<{ message_key: string; payload_hash: Buffer | null }>(
      `SELECT message_key, payload_hash FROM ${db.schema}.processed_messages WHERE consumer = 'hostile'`,
    );
    const stored = new Map(rows.map((r) => [r.message_key, r.payload_hash]));
    expect(stored.size).toBe(HOSTILE.length + 1);
    for (const item of items) {
      expect(stored.has(item.key)).toBe(true);
      const hash = stored.get(item.key) ?? null;
      if (item.hash === null) expect(hash).toBeNull();
      else expect(hash?.equals(item.hash)).toBe(true);
    }
    const tables = await db.pool.query(
      `SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'processed_messages'`,
      [db.schema],
    );
    expect(tables.rowCount).toBe(1);
  });

  it('leaves the lock timeout at its default for the handler', async () => {
    const claims = new BatchClaimStatements(
      { schema: db.schema, table: 'processed_messages' },
      undefined,
    );
    const client = await db.pool.connect();
    try {
      const before = (await client.query<{ lock_timeout: string }>('SHOW lock_timeout')).rows[0];
      await claims.begin(pgClaimSession(client), 'timeout-reset', [{ key: 'k', hash: null }], 1234);
      const inside = (await client.query<{ lock_timeout: string }>('SHOW lock_timeout')).rows[0];
      await client.query('ROLLBACK');
      expect(inside?.lock_timeout).toBe(before?.lock_timeout);
    } finally {
      client.release();
    }
  });
});
