/**
 * Issue 27, defect 2: Kafka batch mode with `pipeline > 1`. When a whole batch fails for
 * an infrastructure reason (here its backend is terminated under the handler), the
 * partition's records must still apply in offset order: the first record of the key
 * goes back for a retry, its followers are released (not retried on their own, each
 * with its own jittered backoff) and follow it. The setup is the shipped
 * examples/kafka-batch-worker.ts one: one partition, keyConcurrency 1, a pipeline and a
 * batch as large as the backlog, `offsets: 'postgres'`.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import { migrateKafkaOffsets } from '../../../adapters/kafka/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  createTopics,
  doubleEffects,
  effectCount,
  effects,
  kafkaTestEnv,
  produce,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_batch_infra', (env) => ({ db, kafka } = env));

beforeAll(async () => {
  await migrateKafkaOffsets(db.pool, { schema: db.schema });
});

describe('Kafka batch mode, pipeline > 1: an infrastructure failure of a whole batch', () => {
  it('re-applies the partition in offset order (the backend of the first batch terminated)', async () => {
    const topic = unique('binfra');
    const groupId = unique('g-binfra');
    const total = 20;
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    await produce(
      kafka,
      topic,
      Array.from({ length: total }, (_, seq) => ({ partition: 0, value: JSON.stringify({ seq }) })),
    );
    await db.pool.query('TRUNCATE effects');
    let terminated = 0;
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      name: 'batch-infra-order',
      source: { pipeline: total, offsets: 'postgres', pool: db.pool, offsetsSchema: db.schema },
      consumer: {
        concurrency: 4,
        batch: { maxSize: total, maxWaitMs: 50 },
        // A spread of delays, so records that back off on their own come back shuffled.
        backoff: { initialMs: 50, maxMs: 400 },
      },
      before: async (_body, ctx) => {
        if (terminated === 0) {
          terminated++;
          const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        }
      },
    });
    try {
      await waitFor(async () => (await effectCount(db)) >= total, {
        timeoutMs: 60_000,
        what: `${total} effects`,
      });
      expect(terminated).toBe(1);
      expect(await doubleEffects(db)).toEqual([]);
      expect((await effects(db)).map((e) => e.kafka_offset)).toEqual(
        Array.from({ length: total }, (_, i) => i),
      );
      // Only the first record of the failed batch went back as a failure; the others of its
      // partition were released behind it (the batch runner's half of the fix).
      expect(running.consumer.stats()).toMatchObject({ failed: 1 });
      expect(running.consumer.stats().released).toBeGreaterThanOrEqual(total - 1);
    } finally {
      await running.stop();
    }
  }, 90_000);
});
