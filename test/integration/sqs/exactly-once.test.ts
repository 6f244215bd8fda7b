import { describe, expect, it } from '@jest/globals';
import type { EffectivelyOnceError } from '../../../src/index.js';
import { sqsMessage } from '../../../adapters/sqs/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration } from './harness.js';

const it_ = sqsIntegration('exactly_once');

describe('SQS exactly-once effect', () => {
  it(
    'one logical message sent 3 times with one Idempotency-Key: effect once, queue empty',
    async () => {
      const { url } = await it_.queues.create('idem', { visibilityTimeout: 5 });
      const key = { 'Idempotency-Key': { DataType: 'String', StringValue: 'order-42' } };
      for (let i = 0; i < 3; i++)
        await it_.queues.send(url, JSON.stringify({ id: 'order-42' }), { MessageAttributes: key });
      await it_.queues.send(url, JSON.stringify({ id: 'order-43' }), {
        MessageAttributes: { 'Idempotency-Key': { DataType: 'String', StringValue: 'order-43' } },
      });
      const consumer = await it_.worker({ queueUrl: url, key: 'Idempotency-Key' });
      await waitFor(() => consumer.stats().processed + consumer.stats().duplicates === 4, {
        what: '4 settled',
      });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, { what: 'queue empty' });
      const effects = await it_.effects();
      expect(effects.map((e) => e.id).sort()).toEqual(['order-42', 'order-43']);
      expect(consumer.stats()).toMatchObject({ processed: 2, duplicates: 2, ackFailures: 0 });
    },
    TIMEOUT,
  );

  it(
    'visibility timeout expiring mid-handler: the second worker blocks on the claim, then deletes the duplicate with its own receipt handle',
    async () => {
      const { url } = await it_.queues.create('race', { visibilityTimeout: 30 });
      await it_.queues.send(url, JSON.stringify({ id: 'race-1' }));
      let releaseA!: () => void;
      const gateA = new Promise<void>((resolve) => (releaseA = resolve));
      let aStarted = false;
      let bHandlerRuns = 0;
      const errorsA: EffectivelyOnceError[] = [];
      const receipts: Record<string, string> = {};

      // Worker A: 1 s visibility, no heartbeat, one message at a time; its handler holds
      // the claim's transaction open until the test lets it go.
      const workerA = await it_.worker(
        { queueUrl: url, heartbeat: false, visibilityTimeout: 1 },
        {
          concurrency: 1,
          handler: async (job, ctx) => {
            receipts.a = sqsMessage(ctx.delivery).ReceiptHandle!;
            await recordEffect(ctx.tx, job.id, 'a', ctx.attempt, receipts.a);
            aStarted = true;
            await gateA;
          },
        },
      );
      workerA.on('error', (e) => errorsA.push(e));
      await waitFor(() => aStarted, { what: 'A handling the message' });
      // A's visibility lapses while its handler still runs: the message is visible again.
      await waitFor(async () => (await it_.queues.depth(url)).visible === 1, {
        what: 'message visible again',
      });

      const bDeliveries: string[] = [];
      const workerB = await it_.worker(
        {
          queueUrl: url,
          heartbeat: false,
          visibilityTimeout: 30,
          // The source's key function sees each message B receives (a standard queue's
          // default key is its MessageId).
          key: (message) => {
            bDeliveries.push(message.ReceiptHandle!);
            return message.MessageId;
          },
        },
        {
          // A already migrated. (migrate's CREATE INDEX IF NOT EXISTS would queue behind A's
          // open transaction for a ShareLock on the table: reported to the core.)
          migrate: false,
          lockTimeoutMs: 20_000,
          handler: async () => {
            bHandlerRuns++;
          },
        },
      );
      // B received the message (attempt 2) and its claim INSERT waits on A's row lock.
      await waitFor(
        async () => {
          const { rows } = await it_.db.pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND query LIKE $1`,
            [`%INSERT INTO "${it_.db.schema}"%`],
          );
          return Number(rows[0]!.n) === 1;
        },
        { what: "B's claim blocked on A's" },
      );
      expect(bDeliveries).toHaveLength(1);
      expect(bDeliveries[0]).not.toBe(receipts.a);

      releaseA();
      await waitFor(() => workerB.stats().duplicates === 1, { what: 'B sees a duplicate' });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, { what: 'queue empty' });

      const effects = await it_.effects();
      expect(effects).toHaveLength(1);
      expect(effects[0]).toMatchObject({ id: 'race-1', worker: 'a', attempt: 1 });
      expect(bHandlerRuns).toBe(0);
      // A's receipt handle went stale when B received the message, and the message is gone
      // because B deleted it with B's own receipt handle (B saw no ack failure). What A's
      // stale delete did is up to the SQS implementation: AWS documents that a delete with
      // an out-of-date receipt handle succeeds but may not delete (LocalStack answers so);
      // ElasticMQ rejects it with ReceiptHandleIsInvalid. Either is fine: A's effect is
      // committed, and the message's later deliveries are duplicates. So A may report ack
      // failures, and if it does they are that and nothing else.
      // (A may also have received the redelivery itself, while its handler ran: the
      // consumer holds up to twice its concurrency. That one is a duplicate too.)
      await workerA.stop({ timeoutMs: 10_000 }); // waits for A's delete to settle
      expect(errorsA.every((e) => e.details.awsCode === 'ReceiptHandleIsInvalid')).toBe(true);
      expect(workerA.stats().ackFailures).toBe(errorsA.length);
      expect(workerA.stats().processed).toBe(1);
      expect(workerB.stats()).toMatchObject({
        processed: 0,
        duplicates: 1,
        ackFailures: 0,
      });
    },
    TIMEOUT,
  );

  it(
    'a handler failing twice then succeeding: effect once, attempts 1, 2, 3',
    async () => {
      const { url } = await it_.queues.create('retry', { visibilityTimeout: 10 });
      await it_.queues.send(url, JSON.stringify({ id: 'flaky-1' }));
      const attempts: number[] = [];
      const consumer = await it_.worker(
        { queueUrl: url },
        {
          maxAttempts: 5,
          handler: async (job, ctx) => {
            attempts.push(ctx.attempt);
            await recordEffect(ctx.tx, job.id, 'w', ctx.attempt, null);
            if (ctx.attempt < 3) throw new Error(`transient failure #${ctx.attempt}`);
          },
        },
      );
      await waitFor(() => consumer.stats().processed === 1, {
        what: 'processed',
        timeoutMs: 30_000,
      });
      await waitFor(async () => (await it_.queues.depth(url)).total === 0, { what: 'queue empty' });
      expect(attempts).toEqual([1, 2, 3]);
      const effects = await it_.effects();
      expect(effects.map((e) => [e.id, e.attempt])).toEqual([['flaky-1', 3]]);
      expect(consumer.stats()).toMatchObject({ failed: 2, retried: 2, processed: 1 });
    },
    TIMEOUT,
  );
});
