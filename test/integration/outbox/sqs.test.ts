import { describe, expect, it } from '@jest/globals';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { createRelay, listParked, migrateOutbox, type Relay } from 'effectively-once/outbox';
import { sqsPublisher } from 'effectively-once/sqs';
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
    await waitFor(() => relay.stats().published === ids.length, { what: 'first publish' });
    // As if the relay had died after each send and before its mark: every row goes again.
    await db.pool.query(
      `UPDATE ${db.table('eo_outbox')} SET state = 'pending', published_at = NULL`,
    );
    relay.wake();
    await waitFor(() => relay.stats().published === 2 * ids.length, { what: 'second publish' });
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

describe('SQS FIFO MessageGroupId from the ordering key', () => {
  it('maps a key SQS cannot take (over 128 characters, or not printable ASCII) to a group of its own, deterministically, in order', async () => {
    const { db, queues } = it_;
    const { url } = await queues.create('outbox-groups', { fifo: true, visibilityTimeout: 10 });
    await migrateOutbox(db.pool, { schema: db.schema });
    await db.pool.query(`TRUNCATE ${db.table('eo_outbox')}`);
    const keys = ['k'.repeat(300), 'acct 1 ü', 'plain-key_1'];
    const messages = [];
    for (let n = 0; n < 3; n++)
      for (const [i, k] of keys.entries())
        messages.push({ destination: 'orders', orderingKey: k, payload: { key: i, n } });
    const ids = await enqueueCommitted(db.pool, messages, db.schema);
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { orders: sqsPublisher({ client: queues.client, queueUrl: url }) },
      maxAttempts: 1,
    });
    await relay.start();
    try {
      // Settled: all published, or something parked (which holds its key back).
      await waitFor(
        async () => {
          const stats = await relay.outboxStats();
          return stats.pending === 0 || stats.parked > 0;
        },
        { what: 'every row settled' },
      );
    } finally {
      await relay.stop();
    }
    const parked = await listParked(db.pool, { schema: db.schema });
    expect(parked.map((p) => p.lastError)).toEqual([]);
    expect(relay.stats().published).toBe(ids.length);
    const received: { group: string; key: number; n: number }[] = [];
    while (received.length < ids.length) {
      const out = await queues.client.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageSystemAttributeNames: ['MessageGroupId'],
        }),
      );
      for (const m of out.Messages ?? []) {
        const body = JSON.parse(m.Body!) as { key: number; n: number };
        received.push({ group: m.Attributes!.MessageGroupId!, ...body });
        await queues.client.send(
          new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }),
        );
      }
    }
    const groups = keys.map((_, i) => [
      ...new Set(received.filter((r) => r.key === i).map((r) => r.group)),
    ]);
    // One group per key; a key SQS takes as it is keeps it.
    expect(groups.map((g) => g.length)).toEqual([1, 1, 1]);
    expect(groups[2]).toEqual(['plain-key_1']);
    for (const [group] of groups) expect(group).toMatch(/^[\x21-\x7e]{1,128}$/);
    expect(new Set(groups.flat()).size).toBe(3);
    for (const i of keys.keys())
      expect(received.filter((r) => r.key === i).map((r) => r.n)).toEqual([0, 1, 2]);
  });
});
