import { describe, expect, it } from '@jest/globals';
import { DEAD_LETTER_ERROR_ATTRIBUTE } from '../../../adapters/sqs/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('dead_letters');

describe('SQS dead letters', () => {
  it(
    'a poison message reaches the DLQ through the redrive policy after maxReceiveCount; other messages flow',
    async () => {
      const { url, dlqUrl } = await it_.queues.create('poison', {
        visibilityTimeout: 10,
        maxReceiveCount: 2,
      });
      await it_.queues.send(url, JSON.stringify({ id: 'poison' }));
      for (let i = 0; i < 5; i++) await it_.queues.send(url, JSON.stringify({ id: `ok-${i}` }));
      const poisonAttempts: number[] = [];
      const consumer = await it_.worker(
        { queueUrl: url },
        {
          maxAttempts: 5,
          handler: async (job, ctx) => {
            if (job.id === 'poison') {
              poisonAttempts.push(ctx.attempt);
              throw new Error('cannot process this one');
            }
            await recordEffect(ctx.tx, job.id, 'w', ctx.attempt, null);
          },
        },
      );
      await waitFor(async () => (await it_.queues.depth(dlqUrl!)).total === 1, {
        what: 'poison message in the DLQ',
        timeoutMs: 30_000,
      });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
        what: 'main queue empty',
      });
      const [letter] = await it_.queues.drain(dlqUrl!);
      expect(JSON.parse(letter!.Body!)).toEqual({ id: 'poison' });
      expect(poisonAttempts).toEqual([1, 2]);
      const effects = await it_.effects();
      expect(effects.map((e) => e.id).sort()).toEqual(['ok-0', 'ok-1', 'ok-2', 'ok-3', 'ok-4']);
      expect(consumer.stats().processed).toBe(5);
    },
    TIMEOUT,
  );

  it(
    'a body that is not JSON never reaches the handler and goes to the DLQ without blocking others (redrive)',
    async () => {
      const { url, dlqUrl } = await it_.queues.create('notjson', {
        visibilityTimeout: 10,
        maxReceiveCount: 2,
      });
      await it_.queues.send(url, 'this is {not json');
      for (let i = 0; i < 3; i++) await it_.queues.send(url, JSON.stringify({ id: `ok-${i}` }));
      const seen: string[] = [];
      const deadLettered: string[] = [];
      const consumer = await it_.worker(
        { queueUrl: url },
        {
          handler: async (job, ctx) => {
            seen.push(job.id);
            await recordEffect(ctx.tx, job.id, 'w', ctx.attempt, null);
          },
        },
      );
      consumer.on('dead-lettered', (event) => deadLettered.push(event.error.code));
      await waitFor(async () => (await it_.queues.depth(dlqUrl!)).total === 1, {
        what: 'bad body in the DLQ',
      });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
        what: 'main queue empty',
      });
      expect(seen.sort()).toEqual(['ok-0', 'ok-1', 'ok-2']);
      expect(deadLettered.length).toBeGreaterThanOrEqual(1);
      expect(new Set(deadLettered)).toEqual(new Set(['EO_BODY_PARSE']));
      const [letter] = await it_.queues.drain(dlqUrl!);
      expect(letter!.Body).toBe('this is {not json');
    },
    TIMEOUT,
  );

  it(
    'with deadLetterQueueUrl, moves the message at once with its attributes and the error, and deletes the original',
    async () => {
      const { url } = await it_.queues.create('explicit', { visibilityTimeout: 10 });
      const { url: dlq } = await it_.queues.create('explicit-dlq');
      const originalId = await it_.queues.send(url, 'not json either', {
        MessageAttributes: { tenant: { DataType: 'String', StringValue: 'acme' } },
      });
      await it_.queues.send(url, JSON.stringify({ id: 'fine' }));
      const consumer = await it_.worker({ queueUrl: url, deadLetterQueueUrl: dlq });
      await waitFor(async () => (await it_.queues.depth(dlq)).total === 1, {
        what: 'moved to the DLQ',
      });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, {
        what: 'main queue empty',
      });
      const [letter] = await it_.queues.drain(dlq);
      expect(letter!.Body).toBe('not json either');
      expect(letter!.MessageAttributes?.tenant?.StringValue).toBe('acme');
      const error = JSON.parse(
        letter!.MessageAttributes![DEAD_LETTER_ERROR_ATTRIBUTE]!.StringValue!,
      ) as Record<string, unknown>;
      expect(error).toMatchObject({
        code: 'EO_BODY_PARSE',
        queueUrl: url,
        messageId: originalId,
        receiveCount: '1',
      });
      expect(consumer.stats()).toMatchObject({ processed: 1, deadLettered: 1 });
      expect((await it_.effects()).map((e) => e.id)).toEqual(['fine']);
    },
    TIMEOUT,
  );
});
