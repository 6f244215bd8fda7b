/**
 * Issue 4, test 5: with `offsets: 'postgres'` the next offset commits with each
 * effect. After the group's Kafka offsets are reset to earliest, a member starts from
 * the stored offsets: no record is applied twice, and none is even looked up again.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import { migrateKafkaOffsets } from '../../../adapters/kafka/index.js';
import { quoteIdentifier } from '../../../src/store/identifiers.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  createTopics,
  doubleEffects,
  effectCount,
  effects,
  kafkaTestEnv,
  produce,
  resetToEarliest,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_pg_offsets', (env) => ({ db, kafka } = env));

beforeAll(async () => {
  await migrateKafkaOffsets(db.pool, { schema: db.schema });
  await migrateKafkaOffsets(db.pool, { schema: db.schema }); // idempotent
});

describe("Kafka: offsets: 'postgres'", () => {
  it('survives a reset of the group offsets to earliest without applying anything twice', async () => {
    const topic = unique('pgoff');
    const groupId = unique('g-pgoff');
    await createTopics(kafka, [{ topic, partitions: 2 }]);
    const batch = (from: number, count: number) =>
      Array.from({ length: count }, (_, i) => ({
        partition: (from + i) % 2,
        value: JSON.stringify({ seq: from + i }),
      }));
    const source = { offsets: 'postgres' as const, pool: db.pool, offsetsSchema: db.schema };

    await produce(kafka, topic, batch(0, 20));
    const a = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'a', source });
    try {
      await waitFor(async () => (await effectCount(db)) === 20, {
        timeoutMs: 30_000,
        what: '20 effects',
      });
    } finally {
      await a.stop();
    }
    const stored = await db.pool.query<{ topic: string; partition: number; next_offset: string }>(
      `SELECT topic, partition, next_offset FROM ${quoteIdentifier(db.schema)}.eo_kafka_offsets WHERE group_id = $1 ORDER BY partition`,
      [groupId],
    );
    expect(stored.rows.map((r) => [r.partition, Number(r.next_offset)])).toEqual([
      [0, 10],
      [1, 10],
    ]);

    // An operator resets the group to the start of the topic (the group is empty now).
    await resetToEarliest(kafka, groupId, topic);
    expect([...(await committedOffsets(kafka, groupId, topic)).values()].every((o) => o <= 0)).toBe(
      true,
    );

    await produce(kafka, topic, batch(20, 10));
    const b = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'b', source });
    try {
      await waitFor(async () => (await effectCount(db)) === 30, {
        timeoutMs: 30_000,
        what: '30 effects',
      });
      await waitFor(
        async () => {
          const offsets = await committedOffsets(kafka, groupId, topic);
          return offsets.get(0) === 15 && offsets.get(1) === 15;
        },
        { timeoutMs: 30_000, what: 'Kafka offsets to catch up' },
      );
      expect(await doubleEffects(db)).toEqual([]);
      // The 20 old records were skipped from the stored offsets: never delivered, not even as duplicates.
      expect(b.calls.map((c) => Number(c.offset)).every((o) => o >= 10)).toBe(true);
      expect(b.consumer.stats()).toMatchObject({ received: 10, processed: 10, duplicates: 0 });
      expect(
        (await effects(db)).map((r) => r.seq).sort((x, y) => (x as number) - (y as number)),
      ).toEqual(Array.from({ length: 30 }, (_, i) => i));
    } finally {
      await b.stop();
    }
  }, 60_000);

  it('batch mode stores the offset past each whole batch, so a restart skips everything applied', async () => {
    const topic = unique('pgoffb');
    const groupId = unique('g-pgoffb');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    const records = (from: number, count: number) =>
      Array.from({ length: count }, (_, i) => ({
        partition: 0,
        value: JSON.stringify({ seq: from + i }),
      }));
    const source = {
      offsets: 'postgres' as const,
      pool: db.pool,
      offsetsSchema: db.schema,
      pipeline: 25,
    };
    const consumer = { batch: { maxSize: 25, maxWaitMs: 20 } };
    await db.pool.query('TRUNCATE effects');
    await produce(kafka, topic, records(0, 100));
    const a = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      source,
      consumer,
    });
    try {
      await waitFor(async () => (await effectCount(db)) === 100, {
        timeoutMs: 30_000,
        what: '100 effects',
      });
    } finally {
      await a.stop();
    }
    const stored = await db.pool.query<{ next_offset: string }>(
      `SELECT next_offset FROM ${quoteIdentifier(db.schema)}.eo_kafka_offsets WHERE group_id = $1`,
      [groupId],
    );
    expect(stored.rows.map((r) => Number(r.next_offset))).toEqual([100]);

    // A restart that finds the group's Kafka offsets behind (here: reset to the start).
    await resetToEarliest(kafka, groupId, topic);
    const b = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'b',
      source,
      consumer,
    });
    try {
      // Every record is below the stored offset: skipped, yet the group's Kafka offset
      // (what lag monitoring reads) still moves to the end.
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 100, {
        timeoutMs: 30_000,
        what: 'the Kafka offset past the skipped records',
      });
      expect(b.consumer.stats().received).toBe(0);
      await produce(kafka, topic, records(100, 10));
      await waitFor(async () => (await effectCount(db)) === 110, {
        timeoutMs: 30_000,
        what: '110 effects',
      });
      expect(await doubleEffects(db)).toEqual([]);
      // Nothing below the stored offset came back, not even to be found a duplicate.
      expect(b.consumer.stats()).toMatchObject({ received: 10, processed: 10, duplicates: 0 });
    } finally {
      await b.stop();
    }
  }, 60_000);
});
