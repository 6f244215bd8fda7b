/**
 * Issue 32 ("Also"): `name` is the dedup namespace, so renaming a consumer re-applies
 * what the broker delivers again across the rename, unless the old name's claims are
 * copied first with examples/sql/rename-consumer.sql (docs/failure-semantics.md,
 * "Renaming a consumer").
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const RENAME_SQL = fs.readFileSync(path.join(repoRoot, 'examples/sql/rename-consumer.sql'), 'utf8');

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('rename');
  await migrate(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());

/** Runs one worker generation under `name` until the message of `id` settles. */
async function deliverUnder(name: string, id: string): Promise<string> {
  const h = await memoryHarness(db, { name });
  await h.consumer.start();
  try {
    const message = h.source.send({ id, amount: 1 }, { key: id });
    await waitFor(() => message.state === 'acked', { what: `${id} acked under ${name}` });
    return h.consumer.stats().duplicates > 0 ? 'duplicate' : 'processed';
  } finally {
    await h.consumer.stop();
  }
}

async function effectsOf(id: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM charges WHERE id = $1',
    [id],
  );
  return rows[0]!.n;
}

describe('renaming a consumer', () => {
  it('without copying its claims: a redelivery across the rename is applied again', async () => {
    expect(await deliverUnder('payments', 'p-1')).toBe('processed');
    expect(await deliverUnder('payments-v2', 'p-1')).toBe('processed');
    expect(await effectsOf('p-1')).toBe(2);
  });

  it('examples/sql/rename-consumer.sql between the generations: the redelivery is a duplicate', async () => {
    expect(RENAME_SQL).toContain("'orders-v2'");
    expect(await deliverUnder('orders', 'o-1')).toBe('processed');
    await db.pool.query(RENAME_SQL);
    // Run twice (an operator's retry): the copy is idempotent.
    await db.pool.query(RENAME_SQL);
    expect(await deliverUnder('orders-v2', 'o-1')).toBe('duplicate');
    expect(await effectsOf('o-1')).toBe(1);
    const { rows } = await db.pool.query<{ consumer: string }>(
      "SELECT consumer FROM processed_messages WHERE message_key = 'o-1' ORDER BY consumer",
    );
    expect(rows.map((r) => r.consumer)).toEqual(['orders', 'orders-v2']);
  });
});
