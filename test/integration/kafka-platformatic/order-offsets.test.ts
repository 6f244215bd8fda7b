/**
 * Issue 25: the source over `@platformatic/kafka`. Records of a partition take effect
 * in offset order (or per Kafka key with `keyConcurrency`), exactly once; with
 * `offsets: 'postgres'` a restart after the group's offsets were reset starts from the
 * stored offsets and looks nothing up again.
 */
import { beforeAll, describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import { migrateKafkaOffsets } from '../../../adapters/kafka/index.js';
import { quoteIdentifier } from '../../../src/store/identifiers.js';
import type { TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  createTopics,
  doubleEffects,
  effectCount,
  effects,
  kafkaTestEnv,
  produce,
  startConsumer,
  resetToEarliest,
  unique,
} from '../kafka/kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_plt_order', (env) => ({ db, kafka } = env));

beforeAll(async () => {
  await migrateKafkaOffsets(db.pool, { schema: db.schema });
});

const PARTITIONS = 3;

describe('Kafka over @platformatic/kafka: order and offsets', () => {
  it("keeps partition order, commits, stores offsets and restarts from them (offsets: 'postgres')", async () => {
    const topic = unique('plt-order');
    const groupId = unique('g-plt-order');
    await createTopics(kafka, [{ topic, partitions: PARTITIONS }]);
    const batch = (from: number, count: number) =>
      Array.from({ length: count }, (_, i) => ({
        partition: (from + i) % PARTITIONS,
        value: JSON.stringify({ seq: Math.floor((from + i) / PARTITIONS) }),
      }));
    const source = { offsets: 'postgres' as const, pool: db.pool, offsetsSchema: db.schema };
    await produce(kafka, topic, batch(0, 60));

    // A random few ms per record, so a partition that is not strictly serial shows it.
    const before = () => sleep(Math.random() * 4);
    const a = await startConsumer({
      client: 'platformatic',
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      source,
      before,
    });
    try {
      await waitFor(async () => (await effectCount(db)) === 60, {
        timeoutMs: 30_000,
        what: '60 effects',
      });
      await waitFor(
        async () =>
          [...(await committedOffsets(kafka, groupId, topic)).values()].every((o) => o === 20),
        { timeoutMs: 30_000, what: 'every partition committed at 20' },
      );
    } finally {
      await a.stop();
    }
    const rows = await effects(db);
    for (let p = 0; p < PARTITIONS; p++) {
      const ofPartition = rows.filter((r) => r.part === p);
      expect(ofPartition.map((r) => r.kafka_offset)).toEqual(
        Array.from({ length: 20 }, (_, i) => i),
      );
      expect(ofPartition.map((r) => r.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i));
      // Strictly serial: each record started after the previous one's transaction.
      for (let i = 1; i < ofPartition.length; i++)
        expect(ofPartition[i]!.started_ms).toBeGreaterThanOrEqual(ofPartition[i - 1]!.finished_ms);
    }
    const stored = await db.pool.query<{ partition: number; next_offset: string }>(
      `SELECT partition, next_offset FROM ${quoteIdentifier(db.schema)}.eo_kafka_offsets WHERE group_id = $1 ORDER BY partition`,
      [groupId],
    );
    expect(stored.rows.map((r) => [r.partition, Number(r.next_offset)])).toEqual([
      [0, 20],
      [1, 20],
      [2, 20],
    ]);

    // An operator resets the (empty) group to the start; the stored offsets still hold.
    await resetToEarliest(kafka, groupId, topic);
    await produce(kafka, topic, batch(60, 9));
    const b = await startConsumer({
      client: 'platformatic',
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'b',
      source,
    });
    try {
      await waitFor(async () => (await effectCount(db)) === 69, {
        timeoutMs: 30_000,
        what: '69 effects',
      });
      await waitFor(
        async () =>
          [...(await committedOffsets(kafka, groupId, topic)).values()].every((o) => o === 23),
        { timeoutMs: 30_000, what: 'Kafka offsets to catch up' },
      );
      expect(await doubleEffects(db)).toEqual([]);
      // The 60 old records were skipped from the stored offsets, not even delivered as duplicates.
      expect(b.calls.map((c) => Number(c.offset)).every((o) => o >= 20)).toBe(true);
      expect(b.consumer.stats()).toMatchObject({ received: 9, processed: 9, duplicates: 0 });
    } finally {
      await b.stop();
    }
  }, 90_000);

  it('with keyConcurrency, handles keys of a partition side by side and each key in order', async () => {
    const topic = unique('plt-keys');
    const groupId = unique('g-plt-keys');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    const keys = ['k0', 'k1', 'k2', 'k3'];
    await produce(
      kafka,
      topic,
      Array.from({ length: 40 }, (_, i) => ({
        partition: 0,
        key: keys[i % keys.length] as string,
        value: JSON.stringify({ seq: i }),
      })),
    );
    await db.pool.query('TRUNCATE effects');
    const a = await startConsumer({
      client: 'platformatic',
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      source: { keyConcurrency: 4 },
      consumer: { concurrency: 8 },
      before: () => sleep(20),
    });
    try {
      await waitFor(async () => (await effectCount(db)) === 40, {
        timeoutMs: 30_000,
        what: '40 effects',
      });
    } finally {
      await a.stop();
    }
    const rows = await effects(db);
    expect(await doubleEffects(db)).toEqual([]);
    for (let k = 0; k < keys.length; k++) {
      const ofKey = rows.filter((r) => (r.seq as number) % keys.length === k);
      expect(ofKey.map((r) => r.seq)).toEqual(
        Array.from({ length: 10 }, (_, i) => i * keys.length + k),
      );
    }
    // Different keys overlapped: some record started before the previous one finished.
    const overlapped = rows.some((r, i) => i > 0 && r.started_ms < rows[i - 1]!.finished_ms);
    expect(overlapped).toBe(true);
  }, 60_000);
});
