/**
 * Issue 32, the admission floor on SQS: a message processed once, its dedup row pruned by
 * the consumer's own retention, then delivered again (its delete was lost, so SQS hands
 * the same message back). Its `SentTimestamp` is older than the window: it can no longer
 * be checked against a claim, so it is dead-lettered as expired, never applied again.
 */
import { describe, expect, it } from '@jest/globals';
import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { DEAD_LETTER_ERROR_ATTRIBUTE, sqsMessage } from '../../../adapters/sqs/index.js';
import { testSqsClient } from '../../helpers/sqs.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('admission_floor');

/** The window of the test: short, so the message outgrows it in seconds. */
const WINDOW_MS = 3000;

describe('SQS: the admission floor', () => {
  it(
    'dead-letters a redelivery whose SentTimestamp is older than the window, once pruned',
    async () => {
      const { url } = await it_.queues.create('floor', { visibilityTimeout: 30 });
      const { url: dlq } = await it_.queues.create('floor-dlq');
      const messageId = await it_.queues.send(url, JSON.stringify({ id: 'op-1' }));

      // A processes the message; its delete never reaches SQS (a lost ack after COMMIT).
      const lossy = testSqsClient();
      lossy.middlewareStack.add(
        (next, context) => async (args) => {
          if (context.commandName === 'DeleteMessageBatchCommand') throw new Error('delete lost');
          return next(args);
        },
        { step: 'initialize', name: 'loseDeletes' },
      );
      let receipt: string | undefined;
      const a = await it_.worker(
        { queueUrl: url, client: lossy, deleteAttempts: 1 },
        {
          name: 'floor',
          // The row carries this retention's expiry: the pruner below deletes it once past.
          retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 },
          handler: async (job, ctx) => {
            receipt = sqsMessage(ctx.delivery).ReceiptHandle;
            await recordEffect(ctx.tx, job.id, 'a', ctx.attempt, null);
          },
        },
      );
      a.on('error', () => undefined);
      await waitFor(() => a.stats().processed === 1 && a.stats().ackFailures === 1, {
        what: 'A processed the message and lost its delete',
      });
      await a.stop();
      // Held in flight until the row is gone, so the redelivery comes after the prune.
      await it_.queues.client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: url,
          ReceiptHandle: receipt!,
          VisibilityTimeout: 600,
        }),
      );

      // The consumer's own retention prunes the row once it is older than the window.
      const pruner = createConsumer({
        name: 'floor',
        pool: it_.db.pool,
        schema: it_.db.schema,
        source: memorySource(),
        handler: async () => undefined,
        retention: { olderThanMs: WINDOW_MS, intervalMs: 100 },
      });
      await pruner.start();
      await waitFor(() => pruner.stats().pruned === 1, {
        what: 'the row pruned',
        timeoutMs: 30_000,
      });
      await pruner.stop();

      // B, with the same retention, gets the same message back.
      const b = await it_.worker(
        { queueUrl: url, deadLetterQueueUrl: dlq },
        {
          name: 'floor',
          retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 },
          handler: async (job, ctx) => {
            await recordEffect(ctx.tx, job.id, 'b', ctx.attempt, null);
          },
        },
      );
      await it_.queues.client.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: url,
          ReceiptHandle: receipt!,
          VisibilityTimeout: 0,
        }),
      );
      await waitFor(() => b.stats().processed + b.stats().deadLettered === 1, {
        what: 'B settled the redelivery',
      });

      // Applied once, by A; B never ran its handler.
      expect((await it_.effects()).map((e) => e.worker)).toEqual(['a']);
      expect(b.stats()).toMatchObject({ processed: 0, deadLettered: 1 });
      const [letter] = await it_.queues.drain(dlq);
      const error = JSON.parse(
        letter!.MessageAttributes![DEAD_LETTER_ERROR_ATTRIBUTE]!.StringValue!,
      ) as { code: string; messageId: string };
      expect(error).toMatchObject({ code: 'EO_DELIVERY_EXPIRED', messageId });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
        what: 'the original deleted',
      });
    },
    TIMEOUT,
  );
});
