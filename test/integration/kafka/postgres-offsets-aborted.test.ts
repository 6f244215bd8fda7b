/**
 * Issue 27, defect 3: with `offsets: 'postgres'` the adapter's hook stores the next
 * offset in the claim's transaction after the handler. A handler that caught a SQL
 * error (and returned normally) has left that transaction aborted, so the hook's
 * statement fails with 25P02. That is the handler's aborted transaction, as with
 * `offsets: 'kafka'` (where COMMIT finds it): EO_TX_ABORTED, an attempt spent,
 * dead-lettered after `maxAttempts`, and the partition moves on. It used to be filed as
 * infrastructure: no attempt spent, retried forever, the partition blocked.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { kafkaSource, migrateKafkaOffsets } from '../../../adapters/kafka/index.js';
import type { Kafka } from 'kafkajs';
import { createConsumer, type ConsumerOptions, type HandlerContext } from '../../../src/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  applyEffect,
  createTopics,
  effects,
  FAST_GROUP,
  kafkaTestEnv,
  produce,
  unique,
  type Body,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_pg_off_abort', (env) => ({ db, kafka } = env));

beforeAll(async () => {
  await migrateKafkaOffsets(db.pool, { schema: db.schema });
});

const modes: Array<[string, Partial<ConsumerOptions<Body>>]> = [
  ['per message', {}],
  ['batch mode', { batch: { maxSize: 10, maxWaitMs: 20 } }],
];

describe.each(modes)("Kafka offsets: 'postgres', %s", (mode, consumerOptions) => {
  it('a handler that caught a SQL error spends its attempts and is dead-lettered; the partition moves on', async () => {
    const topic = unique('pgabort');
    const groupId = unique('g-pgabort');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    await produce(
      kafka,
      topic,
      [0, 1, 2].map((seq) => ({ partition: 0, value: JSON.stringify({ seq, fail: seq === 1 }) })),
    );
    await db.pool.query('TRUNCATE effects');
    const runsOfPoison: number[] = [];
    const failures: Array<{ code: string; willRetry: boolean }> = [];
    const deadLettered: string[] = [];
    const handler = async (body: Body, ctx: HandlerContext<Body>): Promise<void> => {
      const started = performance.timeOrigin + performance.now();
      if (body.fail === true) {
        runsOfPoison.push(ctx.attempt);
        try {
          await ctx.tx.query('SELECT 1 / 0');
        } catch {
          // Swallowed: the transaction is aborted, and the handler returns normally.
        }
        return;
      }
      await applyEffect('a', body, ctx, started);
    };
    const consumer = createConsumer<Body>({
      name: `pgabort-${mode}`,
      pool: db.pool,
      schema: db.schema,
      maxAttempts: 2,
      backoff: { initialMs: 20, maxMs: 50 },
      ...consumerOptions,
      handler,
      source: kafkaSource<Body>({
        kafka,
        groupId,
        topics: [topic],
        fromBeginning: true,
        consumerConfig: FAST_GROUP,
        commitIntervalMs: 100,
        offsets: 'postgres',
        pool: db.pool,
        offsetsSchema: db.schema,
      }),
    });
    consumer.on('failed', (f) => failures.push({ code: f.error.code, willRetry: f.willRetry }));
    consumer.on('dead-lettered', (d) => deadLettered.push(d.error.code));
    await consumer.start();
    try {
      // Bounded: before the fix the poison record looped without end (hundreds of runs).
      await waitFor(async () => (await effects(db)).length === 2 || runsOfPoison.length > 20, {
        timeoutMs: 30_000,
        what: 'records 0 and 2 applied',
      });
      // Batch mode runs it a few more times on attempt 1 while bisecting its batch.
      if (mode === 'per message') expect(runsOfPoison).toEqual([1, 2]);
      else expect(runsOfPoison.slice(-2)).toEqual([1, 2]);
      expect(deadLettered).toEqual(['EO_TX_ABORTED']);
      expect(failures.filter((f) => f.code === 'EO_TX_ABORTED')).toEqual([
        { code: 'EO_TX_ABORTED', willRetry: true },
        { code: 'EO_TX_ABORTED', willRetry: false },
      ]);
      expect((await effects(db)).map((e) => e.seq)).toEqual([0, 2]);
    } finally {
      await consumer.stop({ timeoutMs: 10_000 });
    }
  }, 60_000);
});
