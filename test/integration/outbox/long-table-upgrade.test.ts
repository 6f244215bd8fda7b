/**
 * An outbox table whose name is too long for `<table>_lease_seq` (over 53 bytes) leased
 * from a sequence with a cut name before derived names were hashed. Migrating it with
 * this version creates the hashed-name sequence; its tokens must start past every
 * token the old one handed out, or a relay still running the old version and one
 * running this one could hold the same token for one row.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { enqueue, migrateOutbox } from 'effectively-once/outbox';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
const table = `orders_outbox_${'x'.repeat(44)}`; // 58 bytes: `_lease_seq` no longer fits

beforeAll(async () => {
  db = await createTestDatabase('outbox_long_upgrade');
});

afterAll(async () => {
  await db.close();
});

/** The lease sequences in this test's schema (not `seq`'s own). */
async function sequences(): Promise<string[]> {
  const { rows } = await db.pool.query<{ name: string }>(
    `SELECT sequencename AS name FROM pg_sequences WHERE schemaname = $1 AND sequencename LIKE '%\\_lease\\_seq' ORDER BY 1`,
    [db.schema],
  );
  return rows.map((r) => r.name);
}

describe('a long-named outbox table migrated from cut to hashed derived names', () => {
  it('starts the new lease sequence past the old tokens', async () => {
    await migrateOutbox(db.pool, { schema: db.schema, table });
    const [hashed] = await sequences();
    expect(hashed).toMatch(/_[0-9a-f]{10}_lease_seq$/);
    // Undo to what the previous version left: a sequence named by cutting the table
    // name, far along, and rows leased with its tokens.
    const legacy = `${table.slice(0, 63 - '_lease_seq'.length)}_lease_seq`;
    expect(Buffer.byteLength(legacy)).toBe(63);
    expect(legacy).not.toBe(hashed);
    await db.pool.query(`DROP SEQUENCE "${db.schema}"."${hashed}"`);
    await db.pool.query(`CREATE SEQUENCE "${db.schema}"."${legacy}" START 5000`);
    await enqueue(db.pool, { destination: 'd', payload: { n: 1 } }, { schema: db.schema, table });
    await db.pool.query(`UPDATE "${db.schema}"."${table}" SET lease_token = 4999`);

    await migrateOutbox(db.pool, { schema: db.schema, table });

    expect(await sequences()).toEqual([legacy, hashed].sort());
    const { rows } = await db.pool.query<{ token: string }>(
      `SELECT nextval('"${db.schema}"."${hashed}"')::text AS token`,
    );
    // Past the old sequence's tokens by far more than it will hand out while old relays run.
    expect(BigInt(rows[0]!.token)).toBeGreaterThan(5000n + 1_000_000_000n);
  });
});
