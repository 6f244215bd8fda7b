/**
 * `offsets: 'postgres'` with `keyConcurrency` > 1 and a claim isolation level above
 * READ COMMITTED: every transaction of a partition raises the same offsets row, so two
 * running at once make the later one's upsert fail with a serialization failure
 * (40001, "could not serialize access due to concurrent update") through no fault of
 * its record. That conflict is the library's own row, not the message's: healthy
 * records must all be applied once, none dead-lettered.
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
  kafkaTestEnv,
  produce,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_pg_off_iso', (env) => ({ db, kafka } = env));

beforeAll(async () => {
  await migrateKafkaOffsets(db.pool, { schema: db.schema });
});

const RECORDS = 60;

describe.each(['repeatable read', 'serializable'] as const)(
  "Kafka offsets: 'postgres', keyConcurrency 8, isolationLevel %s",
  (isolationLevel) => {
    it('applies every record once and dead-letters none', async () => {
      const topic = unique('pgiso');
      const groupId = unique('g-pgiso');
      await createTopics(kafka, [
        { topic, partitions: 1 },
        { topic: `${topic}.dlq`, partitions: 1 },
      ]);
      await produce(
        kafka,
        topic,
        Array.from({ length: RECORDS }, (_, seq) => ({
          partition: 0,
          key: `k${seq}`,
          value: JSON.stringify({ seq }),
        })),
      );
      await db.pool.query('TRUNCATE effects');
      const deadLettered: string[] = [];
      const running = await startConsumer({
        db,
        kafka,
        groupId,
        topics: [topic],
        member: 'a',
        name: unique('pgiso'),
        source: { keyConcurrency: 8, offsets: 'postgres', pool: db.pool, offsetsSchema: db.schema },
        consumer: { concurrency: 8, isolationLevel, maxAttempts: 3 },
        before: async (_body, ctx) => {
          await ctx.tx.query('SELECT pg_sleep(0.02)');
        },
      });
      running.consumer.on('dead-lettered', (d) => deadLettered.push(`${d.key}: ${d.error.code}`));
      try {
        await waitFor(async () => (await effectCount(db)) + deadLettered.length >= RECORDS, {
          timeoutMs: 60_000,
          what: 'every record applied or dead-lettered',
        });
      } finally {
        await running.stop();
      }
      expect(deadLettered).toEqual([]);
      expect(await effectCount(db)).toBe(RECORDS);
      expect(await doubleEffects(db)).toEqual([]);
    }, 90_000);
  },
);
