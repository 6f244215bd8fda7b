import { describe, expect, it } from '@jest/globals';
import { createRelay, migrateOutbox, sqsPublisher, type Relay } from 'effectively-once/outbox';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration } from '../sqs/harness.js';
import { enqueueCommitted } from './support.js';

const it_ = sqsIntegration('outbox');
const GROUPS = 3;
const PER_GROUP = 4;

async function publishTwice(queueUrl: string): Promise<string[]> {
  const { db, queues } = it_;
  await migrateOutbox(db.pool, { schema: db.schema });
  await db.pool.query(`TRUNCATE ${db.table('eo_outbox')}`);
  const relay: Relay = createRelay({
    pool: db.pool,
    schema: db.schema,
    publishers: { orders: sqsPublisher({ client: queues.client, queueUrl }) },
  });
  const messages = [];
  for (let seq = 0; seq < PER_GROUP; seq++)
    for (let g = 0; g < GROUPS; g++)
      messages.push({
        destination: 'orders',
        orderingKey: `g${g}`,
        payload: { id: `g${g}-${seq}`, group: `g${g}`, seq },
      });
  const ids = await enqueueCommitted(db.pool, messages, db.schema);
  await relay.start();
  try {
    await waitFor(() => relay.metrics().published === ids.length, { what: 'first publish' });
    // As if the relay had died after each send and before its mark: every row goes again.
    await db.pool.query(
      `UPDATE ${db.table('eo_outbox')} SET state = 'pending', published_at = NULL`,
    );
    relay.wake();
    await waitFor(() => relay.metrics().published === 2 * ids.length, { what: 'second publish' });
  } finally {
    await relay.stop();
  }
  return ids;
}

describe('outbox → SQS → sqsSource', () => {
  it.each([
    ['standard', false],
    ['FIFO', true],
  ])(
    '%s queue: every row published twice is applied once, keyed by its outbox id',
    async (_, fifo) => {
      const { url } = await it_.queues.create('outbox', { fifo, visibilityTimeout: 10 });
      const ids = await publishTwice(url);
      const consumer = await it_.worker(
        { queueUrl: url },
        {
          concurrency: 4,
          handler: async (job, ctx) => {
            await recordEffect(ctx.tx, job.id, ctx.key, ctx.attempt, null);
          },
        },
      );
      await waitFor(() => consumer.stats().processed === ids.length, { what: 'all applied' });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
        what: 'queue drained',
      });
      const effects = await it_.effects();
      // The effect of each row once, under its outbox id (the sqsSource default key).
      expect(effects).toHaveLength(ids.length);
      expect(effects.map((e) => e.worker).sort()).toEqual([...ids].sort());
      if (fifo) {
        // SQS dropped the resends itself (MessageDeduplicationId = outbox id); order per
        // group (MessageGroupId = ordering key) is commit order.
        for (let g = 0; g < GROUPS; g++) {
          expect(effects.filter((e) => e.id.startsWith(`g${g}-`)).map((e) => e.id)).toEqual(
            Array.from({ length: PER_GROUP }, (_, seq) => `g${g}-${seq}`),
          );
        }
      } else {
        // Both copies arrived; the consumer's claim turned the second into a duplicate.
        expect(consumer.stats().duplicates).toBe(ids.length);
      }
    },
    TIMEOUT,
  );
});
