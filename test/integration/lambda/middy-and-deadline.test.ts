import { describe, expect, it } from '@jest/globals';
import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { lambdaConsumer, lambdaConsumerMiddleware } from '../../../adapters/lambda/index.js';
import { InProcessInvoker } from '../../../kit/lambda/invoker.js';
import { TIMEOUT, doubles, lambdaIntegration, recordEffect } from './harness.js';

const it_ = lambdaIntegration('middy');

const idOf = (record: SQSRecord): string => (JSON.parse(record.body) as { id: string }).id;

describe('lambdaConsumerMiddleware through Middy', () => {
  it(
    'runs the records in before, answers in after: duplicates done, a failure returns alone',
    async () => {
      const { url } = await it_.queues.create('lambda-middy', { visibilityTimeout: 1 });
      for (const id of ['a', 'b', 'c']) await it_.queues.send(url, JSON.stringify({ id }));
      let failB = true;
      const seenByBase: number[] = [];
      const exactlyOnce = lambdaConsumerMiddleware({
        name: 'lambda-middy',
        pool: it_.db.pool,
        schema: it_.db.schema,
        handler: async (record, ctx) => {
          const id = idOf(record);
          await recordEffect(ctx.tx, id, ctx.attempt);
          if (id === 'b' && failB) {
            failB = false;
            throw new Error('b fails once');
          }
        },
      });
      const handler = middy<SQSEvent, SQSBatchResponse | void>()
        .use(exactlyOnce)
        .handler(async (event) => {
          seenByBase.push(event.Records.length);
        });
      const mapping = it_.mapping({
        queueUrl: url,
        invoker: new InProcessInvoker(handler),
        batchSize: 10,
        batchingWindowMs: 300,
      });
      await it_.drained(url);
      const effects = await it_.effects();
      expect(doubles(effects)).toEqual([]);
      expect(effects.map((e) => e.id).sort()).toEqual(['a', 'b', 'c']);
      expect(mapping.stats.reportedFailures).toBeGreaterThanOrEqual(1);
      expect(seenByBase.length).toBeGreaterThanOrEqual(2);
      expect(exactlyOnce.consumer.stats().processed).toBe(3);
    },
    TIMEOUT,
  );

  it(
    "onError: a base handler that throws after the records committed answers the records' own verdicts",
    async () => {
      const exactlyOnce = lambdaConsumerMiddleware({
        name: 'lambda-middy-error',
        pool: it_.db.pool,
        schema: it_.db.schema,
        logger: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
        handler: async (record, ctx) => {
          await recordEffect(ctx.tx, idOf(record), ctx.attempt);
          if (idOf(record) === 'x2') throw new Error('x2 fails');
        },
      });
      const handler = middy<SQSEvent, SQSBatchResponse | void>()
        .use(exactlyOnce)
        .handler(async () => {
          throw new Error('the base handler fails');
        });
      const { url } = await it_.queues.create('lambda-middy-error', { visibilityTimeout: 1 });
      for (const id of ['x1', 'x2']) await it_.queues.send(url, JSON.stringify({ id }));
      const batch = await it_.queues.drain(url, 1);
      const { lambdaRecord, queueArnOf } = await import('../../../kit/lambda/records.js');
      const event: SQSEvent = { Records: batch.map((m) => lambdaRecord(m, queueArnOf(url))) };
      const x2 = event.Records.find((r) => idOf(r) === 'x2')!.messageId;
      const { invocationContext } = await import('../../../kit/lambda/invoker.js');
      const answer = await handler(event, invocationContext(Date.now() + 5_000));
      expect(answer).toEqual({ batchItemFailures: [{ itemIdentifier: x2 }] });
    },
    TIMEOUT,
  );
});

describe('the invocation deadline', () => {
  it(
    'times out and rolls back the record still running at the margin, starts none after it, and answers before the function times out',
    async () => {
      const { url } = await it_.queues.create('lambda-deadline', { visibilityTimeout: 1 });
      const ids = ['d0', 'd1', 'd2', 'd3'];
      for (const id of ids) await it_.queues.send(url, JSON.stringify({ id }));
      const started: string[] = [];
      const handler = lambdaConsumer({
        name: 'lambda-deadline',
        pool: it_.db.pool,
        schema: it_.db.schema,
        concurrency: 1,
        deadlineMarginMs: 500,
        handler: async (record, ctx) => {
          started.push(idOf(record));
          await recordEffect(ctx.tx, idOf(record), ctx.attempt);
          // Slow work that ignores ctx.signal: only the deadline's timeout ends it.
          await ctx.tx.query('SELECT pg_sleep(0.7)');
        },
      });
      const mapping = it_.mapping({
        queueUrl: url,
        invoker: new InProcessInvoker(handler),
        batchSize: 4,
        batchingWindowMs: 1_000,
        functionTimeoutMs: 2_000,
      });
      await it_.drained(url);
      // The function never timed out: each invocation answered, some records failed
      // (timed out at the margin, or not started) and came back.
      expect(mapping.stats.failedInvocations).toBe(0);
      expect(mapping.stats.reportedFailures).toBeGreaterThanOrEqual(1);
      expect(handler.consumer.stats().failed).toBeGreaterThanOrEqual(1);
      const effects = await it_.effects();
      expect(doubles(effects)).toEqual([]);
      expect(effects.map((e) => e.id).sort()).toEqual(ids);
    },
    TIMEOUT,
  );
});
