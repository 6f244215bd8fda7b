/**
 * Issue 11: a delivery the adapter lost (its `signal` aborted: Kafka partition revoked,
 * SQS visibility lapsed) is its next owner's to judge. Even when the runner would
 * dead-letter it (a payload mismatch), it is released: no `dead-lettered` event, nothing
 * sent to the dead-letter target.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { payloadHash } from '../../../src/consumer/hash.js';
import { createConsumer, migrate } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { ManualSource } from '../../helpers/manual-source.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('lost_delivery');
  await migrate(db.pool, { schema: db.schema });
});
afterAll(async () => db.close());

describe('a lost delivery whose key was processed with another payload', () => {
  it.each([
    ['per message', undefined],
    ['batch mode', { maxSize: 10, maxWaitMs: 5 }],
  ])('%s: released, never dead-lettered', async (mode, batch) => {
    const key = `lost-${mode}`;
    await db.pool.query(
      'INSERT INTO processed_messages (consumer, message_key, payload_hash) VALUES ($1, $2, $3)',
      ['lost', key, payloadHash('the first payload', undefined)],
    );
    const source = new ManualSource<string>();
    const deadLettered: unknown[] = [];
    const consumer = createConsumer<string>({
      name: 'lost',
      source,
      pool: db.pool,
      schema: db.schema,
      ...(batch === undefined ? {} : { batch }),
      handler: async () => undefined,
    });
    consumer.on('dead-lettered', (e) => deadLettered.push(e));
    await consumer.start();
    try {
      const lost = new AbortController();
      lost.abort(new Error('partition revoked'));
      const result = await source.push({
        key,
        body: 'another payload',
        payload: 'another payload',
        signal: lost.signal,
      });
      expect(result.calls).toEqual(['release']);
      expect(result.outcome).toBe('released');
      expect(deadLettered).toEqual([]);
      expect(consumer.stats().deadLettered).toBe(0);
    } finally {
      await consumer.stop();
    }
  });
});
