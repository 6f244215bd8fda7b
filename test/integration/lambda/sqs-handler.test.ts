import { describe, expect, it } from '@jest/globals';
import type { SQSRecord } from 'aws-lambda';
import { lambdaConsumer } from '../../../adapters/lambda/index.js';
import { InProcessInvoker } from '../../../kit/lambda/invoker.js';
import { TIMEOUT, doubles, lambdaIntegration, recordEffect } from './harness.js';

const it_ = lambdaIntegration('handler');

const keyAttribute = (k: string) => ({
  MessageAttributes: { 'Idempotency-Key': { DataType: 'String', StringValue: k } },
});

interface Job {
  id: string;
  group?: string;
  seq?: number;
}

const job = (record: SQSRecord): Job => JSON.parse(record.body) as Job;

describe('lambdaConsumer behind an SQS event source mapping', () => {
  it(
    'applies each key once: duplicates are answered done, a failed record alone comes back',
    async () => {
      const { url } = await it_.queues.create('lambda-std', { visibilityTimeout: 1 });
      for (const k of ['a', 'b', 'a', 'c', 'a'])
        await it_.queues.send(url, JSON.stringify({ id: k }), keyAttribute(k));
      const runs: string[] = [];
      let failC = true;
      const handler = lambdaConsumer({
        name: 'lambda-dups',
        pool: it_.db.pool,
        schema: it_.db.schema,
        key: 'Idempotency-Key',
        handler: async (record, ctx) => {
          const { id } = job(record);
          runs.push(id);
          await recordEffect(ctx.tx, id, ctx.attempt);
          if (id === 'c' && failC) {
            failC = false;
            throw new Error('downstream hiccup');
          }
        },
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
      // c failed once and was answered failed, alone: the others were deleted.
      expect(runs.filter((id) => id === 'c')).toHaveLength(2);
      expect(mapping.stats.reportedFailures).toBeGreaterThanOrEqual(1);
      expect(mapping.stats.failedInvocations).toBe(0);
      const stats = handler.consumer.stats();
      expect(stats.processed).toBe(3);
      expect(stats.duplicates).toBe(2);
    },
    TIMEOUT,
  );

  it(
    'FIFO: a group stops at its first failure, its rest answered failed unstarted; other groups go on',
    async () => {
      const { url } = await it_.queues.create('lambda-fifo', { fifo: true, visibilityTimeout: 1 });
      // Interleaved groups, sent in order: g1 1..4, g2 1..3.
      const sends: Job[] = [];
      for (let seq = 1; seq <= 4; seq++) {
        sends.push({ id: `g1-${seq}`, group: 'g1', seq });
        if (seq <= 3) sends.push({ id: `g2-${seq}`, group: 'g2', seq });
      }
      for (const j of sends)
        await it_.queues.send(url, JSON.stringify(j), {
          MessageGroupId: j.group!,
          MessageDeduplicationId: j.id,
        });
      const runs: string[] = [];
      let failG1Two = true;
      const handler = lambdaConsumer({
        name: 'lambda-fifo',
        pool: it_.db.pool,
        schema: it_.db.schema,
        handler: async (record, ctx) => {
          const { id } = job(record);
          runs.push(id);
          await recordEffect(ctx.tx, id, ctx.attempt);
          if (id === 'g1-2' && failG1Two) {
            failG1Two = false;
            throw new Error('g1-2 fails once');
          }
        },
      });
      const mapping = it_.mapping({
        queueUrl: url,
        invoker: new InProcessInvoker(handler),
        batchSize: 10,
      });
      await it_.drained(url);
      const effects = await it_.effects();
      expect(doubles(effects)).toEqual([]);
      // Each group applied in its order.
      for (const group of ['g1', 'g2']) {
        const applied = effects.map((e) => e.id).filter((id) => id.startsWith(`${group}-`));
        expect(applied).toEqual(sends.filter((j) => j.group === group).map((j) => j.id));
      }
      // g1-3 never ran before g1-2 succeeded: the runs of g1 are 1, 2 (failed), 2, 3, 4.
      expect(runs.filter((id) => id.startsWith('g1-'))).toEqual([
        'g1-1',
        'g1-2',
        'g1-2',
        'g1-3',
        'g1-4',
      ]);
      expect(mapping.stats.reportedFailures).toBeGreaterThanOrEqual(3);
    },
    TIMEOUT,
  );

  it(
    'batch mode: one transaction per event, a poison record bisected out and answered failed alone',
    async () => {
      const { url } = await it_.queues.create('lambda-batch', { visibilityTimeout: 1 });
      const ids = Array.from({ length: 8 }, (_, i) => `m${i}`);
      for (const id of ids) await it_.queues.send(url, JSON.stringify({ id }), keyAttribute(id));
      let poison = true;
      const batches: number[] = [];
      const handler = lambdaConsumer({
        name: 'lambda-batch',
        pool: it_.db.pool,
        schema: it_.db.schema,
        key: 'Idempotency-Key',
        batch: { maxSize: 10, maxWaitMs: 5 },
        batchHandler: async (items, ctx) => {
          batches.push(items.length);
          for (const item of items) {
            const { id } = job(item.message);
            if (id === 'm5' && poison) {
              poison = false;
              throw new Error('poison once');
            }
            await recordEffect(ctx.tx, id, item.attempt);
          }
        },
      });
      it_.mapping({
        queueUrl: url,
        invoker: new InProcessInvoker(handler),
        batchSize: 10,
        batchingWindowMs: 500,
      });
      await it_.drained(url);
      const effects = await it_.effects();
      expect(doubles(effects)).toEqual([]);
      expect(effects.map((e) => e.id).sort()).toEqual(ids);
      // More than one transaction ran for the records: the failing batch was bisected.
      expect(batches.length).toBeGreaterThan(1);
    },
    TIMEOUT,
  );
});
