/**
 * Issue 11: FIFO queues with `DeduplicationScope=messageGroup` key on
 * `${MessageGroupId} ${MessageDeduplicationId}`, in `sqsSource` and in `withDedup`.
 *
 * ElasticMQ 1.6.11 (the suite's SQS) accepts the attribute at CreateQueue but neither
 * reports it nor deduplicates per group. fauxqs (in-process, on loopback) reports it
 * from GetQueueAttributes, though it too deduplicates queue-wide, so a queue can never
 * hold the same id in two groups here: the collision is staged by handing withDedup the
 * two messages sqs-consumer would receive on AWS; sqsSource's end-to-end test checks the
 * key it derives from what it read. (The collision through sqsSource: unit test
 * test/unit/sqs/dedup-scope.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  CreateQueueCommand,
  SendMessageCommand,
  SQSClient,
  type Message,
} from '@aws-sdk/client-sqs';
import { startFauxqs } from 'fauxqs';
import { createConsumer } from '../../../src/index.js';
import { sqsSource, withDedup, withDedupBatch } from '../../../adapters/sqs/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration, type Job } from './harness.js';

const it_ = sqsIntegration('dedup_scope');

let fauxqs: Awaited<ReturnType<typeof startFauxqs>>;
let client: SQSClient;
beforeAll(async () => {
  fauxqs = await startFauxqs({ port: 0, host: 'localhost', logger: false });
  client = new SQSClient({
    region: 'us-east-1',
    endpoint: `http://127.0.0.1:${fauxqs.port}`,
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
});
afterAll(async () => {
  client.destroy();
  await fauxqs.stop();
});

let queues = 0;
async function perGroupQueue(): Promise<string> {
  const out = await client.send(
    new CreateQueueCommand({
      QueueName: `per-group-${++queues}-${Date.now()}.fifo`,
      Attributes: {
        FifoQueue: 'true',
        DeduplicationScope: 'messageGroup',
        FifoThroughputLimit: 'perMessageGroupId',
        VisibilityTimeout: '30',
      },
    }),
  );
  return out.QueueUrl!;
}

/** What sqs-consumer hands over for a FIFO message (with messageSystemAttributeNames: ['All']). */
function fifoMessage(group: string, dedupId: string, id: string): Message {
  return {
    MessageId: `${group}-${dedupId}-${id}`,
    ReceiptHandle: `rh-${group}-${id}`,
    Body: JSON.stringify({ id }),
    Attributes: {
      MessageGroupId: group,
      MessageDeduplicationId: dedupId,
      ApproximateReceiveCount: '1',
    },
  };
}

const SAME_ID_TWO_GROUPS = [fifoMessage('g1', 'order-7', 'a'), fifoMessage('g2', 'order-7', 'b')];

describe('withDedup under DeduplicationScope=messageGroup', () => {
  it(
    "deduplicationScope: 'messageGroup' given: the same dedup id in two groups is two messages",
    async () => {
      const keys: string[] = [];
      const worker = withDedup(
        async (message, ctx) => {
          keys.push(ctx.key);
          const { id } = JSON.parse(message.Body!) as { id: string };
          await recordEffect(ctx.tx, id, 'scope', ctx.attempt, null);
        },
        {
          name: 'scope-option',
          pool: it_.db.pool,
          schema: it_.db.schema,
          deduplicationScope: 'messageGroup',
        },
      );
      try {
        for (const m of SAME_ID_TWO_GROUPS) await expect(worker.handleMessage(m)).resolves.toBe(m);
      } finally {
        await worker.stop();
      }
      expect(keys).toEqual(['g1 order-7', 'g2 order-7']);
      expect((await it_.effects()).map((e) => e.id)).toEqual(['a', 'b']);
    },
    TIMEOUT,
  );

  it(
    'with client and queueUrl: the scope is read from the queue at start()',
    async () => {
      const queueUrl = await perGroupQueue();
      const keys: string[] = [];
      const worker = withDedup(
        async (message, ctx) => {
          keys.push(ctx.key);
          const { id } = JSON.parse(message.Body!) as { id: string };
          await recordEffect(ctx.tx, id, 'scope', ctx.attempt, null);
        },
        { name: 'scope-read', pool: it_.db.pool, schema: it_.db.schema, client, queueUrl },
      );
      try {
        await worker.start();
        for (const m of SAME_ID_TWO_GROUPS) await expect(worker.handleMessage(m)).resolves.toBe(m);
      } finally {
        await worker.stop();
      }
      expect(keys).toEqual(['g1 order-7', 'g2 order-7']);
      expect((await it_.effects()).map((e) => e.id)).toEqual(['a', 'b']);
    },
    TIMEOUT,
  );

  it(
    "withDedupBatch, deduplicationScope: 'messageGroup': both messages reach the batch handler",
    async () => {
      const seen: string[] = [];
      const worker = withDedupBatch(
        async (messages, ctx) => {
          for (const m of messages) {
            const { id } = JSON.parse(m.Body!) as { id: string };
            seen.push(id);
            await recordEffect(ctx.tx, id, 'scope-batch', 1, null);
          }
        },
        {
          name: 'scope-batch',
          pool: it_.db.pool,
          schema: it_.db.schema,
          deduplicationScope: 'messageGroup',
        },
      );
      try {
        const deleted = await worker.handleMessageBatch([...SAME_ID_TWO_GROUPS]);
        expect(deleted).toHaveLength(2);
      } finally {
        await worker.stop();
      }
      expect(seen.sort()).toEqual(['a', 'b']);
    },
    TIMEOUT,
  );

  it(
    'queue scope (the default) keeps the dedup id as the key: the second group’s message is a duplicate',
    async () => {
      const keys: string[] = [];
      const worker = withDedup(
        async (_message, ctx) => {
          keys.push(ctx.key);
        },
        { name: 'scope-queue', pool: it_.db.pool, schema: it_.db.schema },
      );
      // Same body too, so the second is a plain duplicate rather than a payload mismatch.
      const pair = [fifoMessage('g1', 'order-7', 'same'), fifoMessage('g2', 'order-7', 'same')];
      try {
        for (const m of pair) await expect(worker.handleMessage(m)).resolves.toBe(m);
      } finally {
        await worker.stop();
      }
      expect(keys).toEqual(['order-7']);
      expect(worker.consumer.stats()).toMatchObject({ processed: 1, duplicates: 1 });
    },
    TIMEOUT,
  );
});

describe('sqsSource under DeduplicationScope=messageGroup', () => {
  it(
    'reads the scope at start and keys each message on "group dedupId"',
    async () => {
      const queueUrl = await perGroupQueue();
      for (const [group, dedupId, id] of [
        ['g1', 'd-1', 'x'],
        ['g2', 'd-2', 'y'],
      ] as const) {
        await client.send(
          new SendMessageCommand({
            QueueUrl: queueUrl,
            MessageBody: JSON.stringify({ id }),
            MessageGroupId: group,
            MessageDeduplicationId: dedupId,
          }),
        );
      }
      const keys: string[] = [];
      const consumer = createConsumer<Job>({
        name: 'scope-source',
        pool: it_.db.pool,
        schema: it_.db.schema,
        source: sqsSource<Job>({ client, queueUrl, waitTimeSeconds: 1 }),
        handler: async (job, ctx) => {
          keys.push(ctx.key);
          await recordEffect(ctx.tx, job.id, 'scope-source', ctx.attempt, null);
        },
      });
      await consumer.start();
      try {
        await waitFor(() => keys.length >= 2, { timeoutMs: 20_000, what: 'both messages' });
      } finally {
        await consumer.stop({ timeoutMs: 2000 });
      }
      expect(keys.sort()).toEqual(['g1 d-1', 'g2 d-2']);
    },
    TIMEOUT,
  );
});
