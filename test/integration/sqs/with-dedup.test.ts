import { describe, expect, it } from '@jest/globals';
import { Consumer } from 'sqs-consumer';
import { withDedup, withDedupBatch } from '../../../adapters/sqs/index.js';
import type { Consumer as DedupConsumer } from '../../../src/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('with_dedup');

/** Stops sqs-consumer, aborting its long poll, and resolves once it says it stopped. */
function stopApp(app: Consumer): Promise<void> {
  return new Promise((resolve) => {
    app.once('stopped', () => resolve());
    app.stop({ abort: true });
  });
}

/**
 * Waits for the work (three keys processed, two duplicates), then for the deletes. The
 * work first: a queue's depth is approximate (AWS: eventually consistent), and
 * LocalStack can report 0 right after the sends, before anything was received.
 */
async function drained(consumer: DedupConsumer, url: string): Promise<void> {
  await waitFor(
    () => {
      const stats = consumer.stats();
      return stats.processed === 3 && stats.duplicates === 2;
    },
    { what: 'three processed, two duplicates', timeoutMs: 30_000 },
  );
  await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
    what: 'queue empty',
    timeoutMs: 30_000,
  });
}

describe('withDedup around sqs-consumer', () => {
  it(
    'handleMessage: duplicates are skipped and deleted, the effect happens once, failures stay on the queue',
    async () => {
      const { url } = await it_.queues.create('legacy', { visibilityTimeout: 2 });
      const key = (k: string) => ({ 'Idempotency-Key': { DataType: 'String', StringValue: k } });
      for (let i = 0; i < 3; i++)
        await it_.queues.send(url, JSON.stringify({ id: 'pay-1' }), {
          MessageAttributes: key('pay-1'),
        });
      await it_.queues.send(url, JSON.stringify({ id: 'pay-2' }), {
        MessageAttributes: key('pay-2'),
      });
      await it_.queues.send(url, JSON.stringify({ id: 'pay-3' }), {
        MessageAttributes: key('pay-3'),
      });

      let failPay3 = true;
      const calls: string[] = [];
      // An existing sqs-consumer handler, now writing through ctx.tx.
      const worker = withDedup(
        async (message, ctx) => {
          const { id } = JSON.parse(message.Body!) as { id: string };
          calls.push(id);
          await recordEffect(ctx.tx, id, 'legacy', ctx.attempt, message.ReceiptHandle ?? null);
          if (id === 'pay-3' && failPay3) {
            failPay3 = false;
            throw new Error('downstream hiccup');
          }
        },
        {
          name: 'legacy',
          pool: it_.db.pool,
          schema: it_.db.schema,
          key: 'Idempotency-Key',
          client: it_.queues.client,
          queueUrl: url,
          backoff: () => 0,
        },
      );
      const processingErrors: Error[] = [];
      const app = Consumer.create({
        queueUrl: url,
        sqs: it_.queues.client,
        batchSize: 5,
        waitTimeSeconds: 1,
        messageAttributeNames: ['Idempotency-Key'],
        messageSystemAttributeNames: ['ApproximateReceiveCount'],
        handleMessage: worker.handleMessage,
      });
      app.on('processing_error', (error) => processingErrors.push(error));
      app.on('error', () => undefined);
      app.start();
      try {
        await drained(worker.consumer, url);
      } finally {
        await stopApp(app);
        await worker.stop();
      }
      const effects = await it_.effects();
      expect(effects.map((e) => e.id).sort()).toEqual(['pay-1', 'pay-2', 'pay-3']);
      expect(worker.consumer.stats()).toMatchObject({ processed: 3, duplicates: 2, failed: 1 });
      expect(calls.filter((id) => id === 'pay-1')).toHaveLength(1);
      expect(calls.filter((id) => id === 'pay-3')).toHaveLength(2);
      expect(processingErrors).toHaveLength(1);
      expect(processingErrors[0]!.message).toMatch(/downstream hiccup/);
    },
    TIMEOUT,
  );

  it(
    'handleMessageBatch: one transaction per batch, only new messages reach the handler, all are deleted',
    async () => {
      const { url } = await it_.queues.create('legacy-batch', { visibilityTimeout: 5 });
      for (const id of ['b-1', 'b-2', 'b-1', 'b-3', 'b-2']) {
        await it_.queues.send(url, JSON.stringify({ id }), {
          MessageAttributes: { 'Idempotency-Key': { DataType: 'String', StringValue: id } },
        });
      }
      const batches: string[][] = [];
      const worker = withDedupBatch(
        async (messages, ctx) => {
          const ids = messages.map((m) => (JSON.parse(m.Body!) as { id: string }).id);
          batches.push(ids);
          for (const id of ids) await recordEffect(ctx.tx, id, 'batch', 1, null);
        },
        {
          name: 'legacy-batch',
          pool: it_.db.pool,
          schema: it_.db.schema,
          key: 'Idempotency-Key',
        },
      );
      const app = Consumer.create({
        queueUrl: url,
        sqs: it_.queues.client,
        batchSize: 10,
        waitTimeSeconds: 1,
        messageAttributeNames: ['All'],
        messageSystemAttributeNames: ['All'],
        handleMessageBatch: worker.handleMessageBatch,
      });
      app.on('error', () => undefined);
      app.start();
      try {
        await drained(worker.consumer, url);
      } finally {
        await stopApp(app);
        await worker.stop();
      }
      const effects = await it_.effects();
      expect(effects.map((e) => e.id).sort()).toEqual(['b-1', 'b-2', 'b-3']);
      expect(batches.flat().sort()).toEqual(['b-1', 'b-2', 'b-3']);
      expect(worker.consumer.stats()).toMatchObject({ processed: 3, duplicates: 2 });
    },
    TIMEOUT,
  );
});
