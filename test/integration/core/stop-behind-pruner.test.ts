/**
 * `stop({ timeoutMs })` while the retention pruner's tick is queued for a pool whose
 * connections are all held (a pool shared with the application, a handler given up on
 * at the hard stop that still holds its own). pg queues a query for a client without
 * bound, and stop() awaited the tick: it waited for as long as the pool stayed busy.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer, migrate } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { waitFor, within } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('stop_behind_pruner');
  await migrate(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());

describe('stop() with a prune tick queued behind busy connections', () => {
  it('resolves within its deadline', async () => {
    const pool = new pg.Pool({ connectionString: databaseUrl(), max: 1 });
    pool.on('error', () => undefined);
    const consumer = createConsumer<unknown>({
      name: 'pruned',
      source: memorySource(),
      pool,
      schema: db.schema,
      retention: { olderThanMs: 60_000, intervalMs: 100 },
      handler: async () => undefined,
    });
    await consumer.start();
    const held = await pool.connect();
    try {
      await waitFor(() => pool.waitingCount > 0, { what: 'a prune tick waiting for the pool' });
      // Liveness bound, far past the 200 ms deadline.
      expect(await within(consumer.stop({ timeoutMs: 200 }), 10_000)).toBeUndefined();
    } finally {
      held.release();
      await consumer.stop();
      await pool.end();
    }
  });
});
