/**
 * Issue 27, "to confirm": SQS FIFO. When the head of a group goes back for a retry, the
 * rest of the group received with it is released (held back, never run) so it cannot
 * overtake it. SQS counts each of those receives, and `attempt` is SQS's receive count:
 * an innocent follower could reach `maxAttempts` without ever running.
 *
 * AWS-faithful emulators only (CI: ElasticMQ): LocalStack 3.8 unblocks the group while
 * the head is in flight, so there the follower runs after the head's first failure
 * (docs/compatibility.md, fifo-retry.test.ts).
 */
import { describe, expect, it } from '@jest/globals';
import { TIMEOUT, recordEffect, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('fifo_hold_back');

describe('SQS FIFO: followers held back behind a retried head', () => {
  it(
    'start their own attempts at 1, so a follower failing once is retried, not dead-lettered',
    async () => {
      const { url } = await it_.queues.create('holdback', { fifo: true, visibilityTimeout: 10 });
      for (const id of ['head', 'follower'])
        await it_.queues.send(url, JSON.stringify({ id }), {
          MessageGroupId: 'g',
          MessageDeduplicationId: id,
        });
      const runs: Array<{ id: string; attempt: number }> = [];
      const deadLettered: string[] = [];
      const consumer = await it_.worker(
        { queueUrl: url, deadLetterQueueUrl: (await it_.queues.create('holdback-dlq')).url },
        {
          maxAttempts: 3,
          handler: async (job, ctx) => {
            runs.push({ id: job.id, attempt: ctx.attempt });
            // The head needs three attempts; the follower fails its first run once.
            if (runs.filter((r) => r.id === job.id).length < (job.id === 'head' ? 3 : 2))
              throw new Error(`${job.id} fails`);
            await recordEffect(ctx.tx, job.id, 'w', ctx.attempt, null);
          },
        },
      );
      consumer.on('dead-lettered', ({ key }) => deadLettered.push(String(key)));
      const deadline = Date.now() + 40_000;
      while ((await it_.effects()).length < 2 && deadLettered.length === 0 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect(deadLettered).toEqual([]);
      expect(runs).toEqual([
        { id: 'head', attempt: 1 },
        { id: 'head', attempt: 2 },
        { id: 'head', attempt: 3 },
        { id: 'follower', attempt: 1 },
        { id: 'follower', attempt: 2 },
      ]);
      expect((await it_.effects()).map((e) => e.id)).toEqual(['head', 'follower']);
    },
    TIMEOUT,
  );
});
