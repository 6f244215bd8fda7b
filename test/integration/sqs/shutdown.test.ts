import { describe, expect, it } from '@jest/globals';
import { testSqsClient } from '../../helpers/sqs.js';
import { sqsMessage } from '../../../adapters/sqs/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import type { HandlerContext } from '../../../src/index.js';
import { TIMEOUT, recordEffect, sqsIntegration, type Job } from './harness.js';

const it_ = sqsIntegration('shutdown');

const COUNT = 40;

describe('SQS consumer stop()', () => {
  it(
    'mid-stream: no message is deleted without its commit; a restart finishes the rest exactly once',
    async () => {
      const { url } = await it_.queues.create('stop', { visibilityTimeout: 5 });
      for (let i = 0; i < COUNT; i++) await it_.queues.send(url, JSON.stringify({ id: `m${i}` }));

      // Every receipt handle the consumer asks SQS to delete, seen on the wire.
      const client = testSqsClient();
      const deleted: string[] = [];
      client.middlewareStack.add(
        (next, context) => async (args) => {
          if (context.commandName === 'DeleteMessageBatchCommand') {
            const input = args.input as { Entries?: Array<{ ReceiptHandle?: string }> };
            for (const entry of input.Entries ?? []) deleted.push(entry.ReceiptHandle!);
          }
          return next(args);
        },
        { step: 'initialize', name: 'recordDeletes' },
      );
      const handler = async (job: Job, ctx: HandlerContext<Job>): Promise<void> => {
        await recordEffect(
          ctx.tx,
          job.id,
          'w',
          ctx.attempt,
          sqsMessage(ctx.delivery).ReceiptHandle!,
        );
        await new Promise((r) => setTimeout(r, 20 + Math.random() * 60));
      };

      const first = await it_.worker(
        { queueUrl: url, client, batchSize: 5 },
        { concurrency: 5, handler },
      );
      await waitFor(() => first.stats().processed >= 10, { what: '10 processed' });
      await first.stop({ timeoutMs: 10_000 });

      const committed = await it_.effects();
      const committedReceipts = new Set(committed.map((e) => e.receipt));
      expect(committed.length).toBeGreaterThanOrEqual(10);
      expect(committed.length).toBeLessThan(COUNT);
      // Every delete sent carried the receipt handle of a committed effect...
      expect(deleted.filter((handle) => !committedReceipts.has(handle))).toEqual([]);
      // ...and every committed effect was deleted before stop() resolved.
      expect(new Set(deleted)).toEqual(committedReceipts);
      // What never started was released (visible again at once), not left in flight.
      await waitFor(
        async () => {
          const depth = await it_.queues.depth(url);
          return depth.total === COUNT - committed.length && depth.inFlight === 0;
        },
        { what: 'the rest back on the queue', timeoutMs: 7_000 },
      );

      const second = await it_.worker({ queueUrl: url, client }, { concurrency: 5, handler });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
        what: 'the rest processed',
      });
      await second.stop();
      const effects = await it_.effects();
      expect(effects.map((e) => e.id).sort()).toEqual(
        Array.from({ length: COUNT }, (_, i) => `m${i}`).sort(),
      );
      expect(second.stats().duplicates).toBe(0);
      client.destroy();
    },
    TIMEOUT,
  );
});
