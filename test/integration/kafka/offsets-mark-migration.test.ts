/**
 * The offsets table's mark columns (issue 32, defect 5) came after its first version:
 * migrating a table made before them adds them, and the rows already in it keep their
 * stored offsets (without a mark, checked as before).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { migrateKafkaOffsets } from '../../../adapters/kafka/index.js';
import { PostgresOffsetStore } from '../../../adapters/kafka/postgres-offsets.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('kafka_offsets_mark');
});
afterAll(async () => {
  await db.close();
});

describe('migrateKafkaOffsets on a table from before the mark', () => {
  it('adds the mark columns and keeps the stored offsets', async () => {
    const table = db.table('old_offsets');
    await db.pool.query(`CREATE TABLE ${table} (
      group_id text NOT NULL, topic text NOT NULL, partition integer NOT NULL,
      next_offset bigint NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (group_id, topic, partition))`);
    await db.pool.query(
      `INSERT INTO ${table} (group_id, topic, partition, next_offset) VALUES ('g', 't', 0, 50)`,
    );

    await migrateKafkaOffsets(db.pool, { schema: db.schema, table: 'old_offsets' });

    const store = new PostgresOffsetStore(db.pool, 'g', {
      schema: db.schema,
      table: 'old_offsets',
    });
    expect(await store.load(['t'])).toEqual(new Map([['t/0', { next: 50n, mark: undefined }]]));
    const tx = await db.pool.connect();
    try {
      await store.save(tx, 't', 0, 60n, { offset: 59n, timestamp: 1_700_000_000_123n });
      // A lower offset from a slower owner moves neither the offset nor the mark.
      await store.save(tx, 't', 0, 55n, { offset: 54n, timestamp: 1n });
    } finally {
      tx.release();
    }
    expect(await store.load(['t'])).toEqual(
      new Map([['t/0', { next: 60n, mark: { offset: 59n, timestamp: 1_700_000_000_123n } }]]),
    );
  });
});
