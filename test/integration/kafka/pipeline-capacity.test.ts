/**
 * `pipeline` under back-pressure: more records handed over than the consumer has room
 * for. Each partition must still be applied in offset order ("each partition is
 * handled in offset order"): records of an ordering key wait for capacity one after
 * the other, never each on its own, so a freed slot cannot let a later one go first.
 */
import { describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import type { ConsumerOptions } from '../../../src/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  createTopics,
  doubleEffects,
  effects,
  kafkaTestEnv,
  produce,
  startConsumer,
  unique,
  type Body,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_pipe_cap', (env) => ({ db, kafka } = env));

// Capacity: per-message mode 2 × concurrency; batch mode (concurrency + 1) × maxSize.
// Both are well below partitions × pipeline = 40 records in flight.
const modes: Array<[string, Partial<ConsumerOptions<Body>>]> = [
  ['per-message mode', { concurrency: 2 }],
  ['batch mode', { concurrency: 1, batch: { maxSize: 3, maxWaitMs: 5 } }],
];

describe.each(modes)('Kafka: pipeline beyond the consumer capacity, %s', (mode, options) => {
  it('applies every partition in offset order, each record once', async () => {
    const topic = unique('pipe-cap');
    const groupId = unique('g-pipe-cap');
    const partitions = 4;
    const perPartition = 150;
    await createTopics(kafka, [{ topic, partitions }]);
    for (let partition = 0; partition < partitions; partition++)
      await produce(
        kafka,
        topic,
        Array.from({ length: perPartition }, (_, seq) => ({
          partition,
          value: JSON.stringify({ seq }),
        })),
      );
    await db.pool.query('TRUNCATE effects');
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      name: `pipe-cap-${mode}`,
      source: { pipeline: 10 },
      consumer: options,
    });
    try {
      await waitFor(
        async () => {
          const committed = await committedOffsets(kafka, groupId, topic);
          return [...Array(partitions).keys()].every((p) => committed.get(p) === perPartition);
        },
        { timeoutMs: 120_000, what: 'every record committed' },
      );
      expect(await doubleEffects(db)).toEqual([]);
      const applied = await effects(db);
      expect(applied).toHaveLength(partitions * perPartition);
      const outOfOrder: string[] = [];
      const last = new Map<number, number>();
      for (const row of applied) {
        const before = last.get(row.part) ?? -1;
        if (row.kafka_offset < before)
          outOfOrder.push(`p${row.part}: ${row.kafka_offset} after ${before}`);
        last.set(row.part, Math.max(before, row.kafka_offset));
      }
      expect({ violations: outOfOrder.length, first: outOfOrder.slice(0, 3) }).toEqual({
        violations: 0,
        first: [],
      });
    } finally {
      await running.stop();
    }
  }, 180_000);
});
