/**
 * Issue 33, section 1: the claim-transaction driver's `ConflictPolicy.stopOn`, as the
 * consumer's doors set it. A delivery lost during a serialization race (its signal
 * aborted: partition revoked, visibility lapsed) is not run again in place: its next
 * owner judges it. The per-message runner stops on the delivery's signal; the batch
 * runner, one transaction for many deliveries, does not, and runs the race again up
 * to `serializationRetries`.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createConsumer, migrate } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { ManualSource } from '../../helpers/manual-source.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('conflict_stop_on');
  await migrate(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());

/** What the handler throws: a serialization failure, as pg hands it over. */
function serializationFailure(): Error {
  return Object.assign(new Error('could not serialize access'), {
    code: '40001',
    severity: 'ERROR',
  });
}

describe('a delivery lost during a serialization race', () => {
  it.each([
    ['per message', undefined, 1],
    ['batch mode', { maxSize: 10, maxWaitMs: 5 }, 3],
  ])('%s: run again only as its runner says (stopOn)', async (mode, batch, runs) => {
    const source = new ManualSource<string>();
    const lost = new AbortController();
    let calls = 0;
    const consumer = createConsumer<string>({
      name: `stop-on-${mode}`,
      source,
      pool: db.pool,
      schema: db.schema,
      serializationRetries: 2,
      ...(batch === undefined ? {} : { batch }),
      handler: async () => {
        calls++;
        lost.abort(new Error('partition revoked'));
        throw serializationFailure();
      },
    });
    await consumer.start();
    try {
      const result = await source.push({
        key: `lost-in-a-race-${mode}`,
        body: 'payload',
        payload: 'payload',
        signal: lost.signal,
      });
      expect(calls).toBe(runs);
      expect(consumer.stats().serializationRetries).toBe(runs - 1);
      expect(result.calls).toEqual(['release']);
    } finally {
      await consumer.stop();
    }
  });
});
