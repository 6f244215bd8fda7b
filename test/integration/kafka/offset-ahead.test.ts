/**
 * Issue 11: with `offsets: 'postgres'`, a topic deleted and recreated leaves a stored
 * next offset above the new partition's log end. The source must not seek there in a
 * loop nor skip anything: it emits EO_KAFKA_OFFSET_AHEAD on the consumer's `error`
 * event (topic, partition, storedOffset, highWatermark), pauses the partition, and
 * processes none of its records.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import { migrateKafkaOffsets } from '../../../adapters/kafka/index.js';
import type { EffectivelyOnceError } from '../../../src/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import {
  createTopics,
  effects,
  kafkaTestEnv,
  produce,
  recreateTopic,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_offset_ahead', (env) => ({ db, kafka } = env));

beforeAll(async () => {
  await migrateKafkaOffsets(db.pool, { schema: db.schema });
});

const record = (key: string, seq: number) => ({
  value: JSON.stringify({ seq }),
  headers: { 'idempotency-key': key },
});

describe("Kafka, offsets: 'postgres', topic deleted and recreated", () => {
  it('a stored offset above the log end is reported as EO_KAFKA_OFFSET_AHEAD and the partition is left alone', async () => {
    const topic = unique('ahead');
    const groupId = unique('g-ahead');
    const source = { offsets: 'postgres' as const, pool: db.pool, offsetsSchema: db.schema };
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    await produce(
      kafka,
      topic,
      Array.from({ length: 5 }, (_, i) => record(`old-${i}`, i)),
    );
    const a = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'a', source });
    try {
      await waitFor(async () => (await effects(db)).length === 5, {
        timeoutMs: 30_000,
        what: 'the 5 first records',
      });
    } finally {
      await a.stop();
    }

    await recreateTopic(kafka, topic);
    await produce(kafka, topic, [record('new-0', 100), record('new-1', 101)]);

    const b = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'b', source });
    const errors: EffectivelyOnceError[] = [];
    b.consumer.on('error', (e) => errors.push(e));
    try {
      const ahead = await waitFor(() => errors.find((e) => e.code === 'EO_KAFKA_OFFSET_AHEAD'), {
        timeoutMs: 30_000,
        what: 'an EO_KAFKA_OFFSET_AHEAD error',
      });
      expect(ahead.details.topic).toBe(topic);
      expect(ahead.details.partition).toBe(0);
      expect(String(ahead.details.storedOffset)).toBe('5');
      expect(String(ahead.details.highWatermark)).toBe('2');
      await sleep(3000); // the partition stays paused: nothing of it is processed meanwhile
      expect(b.calls).toEqual([]);
      expect((await effects(db)).map((e) => e.key).filter((k) => k.startsWith('new-'))).toEqual([]);
    } finally {
      await b.stop();
    }
  }, 120_000);

  it('a recreated topic already longer than the stored offset is reported, not skipped (issue 32)', async () => {
    const topic = unique('ahead-long');
    const groupId = unique('g-ahead-long');
    const source = { offsets: 'postgres' as const, pool: db.pool, offsetsSchema: db.schema };
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    await produce(
      kafka,
      topic,
      Array.from({ length: 50 }, (_, i) => record(`long-old-${i}`, i)),
    );
    const a = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'a', source });
    try {
      await waitFor(
        async () => (await effects(db)).filter((e) => e.topic === topic).length === 50,
        {
          timeoutMs: 30_000,
          what: 'the 50 first records',
        },
      );
    } finally {
      await a.stop();
    }

    // The new log holds more records than the stored offset (50): the old guard, which
    // compares the stored offset with the log end, saw nothing wrong.
    await recreateTopic(kafka, topic);
    await produce(
      kafka,
      topic,
      Array.from({ length: 80 }, (_, i) => record(`long-new-${i}`, 100 + i)),
    );

    const b = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'b', source });
    const errors: EffectivelyOnceError[] = [];
    b.consumer.on('error', (e) => errors.push(e));
    try {
      const ahead = await waitFor(() => errors.find((e) => e.code === 'EO_KAFKA_OFFSET_AHEAD'), {
        timeoutMs: 30_000,
        what: 'an EO_KAFKA_OFFSET_AHEAD error',
      });
      expect(ahead.details.topic).toBe(topic);
      expect(ahead.details.partition).toBe(0);
      expect(String(ahead.details.storedOffset)).toBe('50');
      await sleep(3000); // the partition stays paused: nothing of it is skipped or processed
      expect(b.calls).toEqual([]);
      expect(
        (await effects(db)).map((e) => e.key).filter((k) => k.startsWith('long-new-')),
      ).toEqual([]);
      expect(b.source.partitions()[0]?.committed).toBeUndefined();
    } finally {
      await b.stop();
    }
  }, 120_000);
});
