/**
 * A Kafka topic deleted and recreated, default settings (`offsets: 'kafka'`, payload hash
 * on, records without an `idempotency-key` header, so the default key is the record's
 * position). The recreated topic's offsets start at 0 again while the old records' claims
 * are still in the dedup window: a key of offsets alone gives the new records the old
 * ones' keys, so a new value is refused as a payload mismatch (dead-lettered, never
 * applied) and one whose bytes equal the old record's at that offset is acked as a
 * duplicate (lost). The default key must name the record, not only its position: the
 * new records are applied, and a redelivery of one record is still a duplicate.
 */
import { describe, expect, it } from '@jest/globals';
import type { EachMessagePayload, Kafka } from 'kafkajs';
import { exactlyOnceEachMessage } from '../../../adapters/kafka/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FAST_GROUP,
  createTopics,
  effects,
  kafkaTestEnv,
  produce,
  recreateTopic,
  resetToEarliest,
  startConsumer,
  unique,
  type RunningConsumer,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_recreated_keys', (env) => ({ db, kafka } = env));

const seqs = (...values: number[]) => values.map((seq) => ({ value: JSON.stringify({ seq }) }));

/** Waits until `running` has settled `count` records, whatever their outcome (a mismatch is dead-lettered). */
async function settled(running: RunningConsumer, count: number): Promise<void> {
  await waitFor(
    () => {
      const s = running.consumer.stats();
      return s.processed + s.duplicates + s.deadLettered >= count;
    },
    { timeoutMs: 30_000, what: `${count} records settled` },
  );
}

/** Runs member `member` of `groupId` until it settled `count` records; returns its stats. */
async function consume(groupId: string, topic: string, member: string, count: number) {
  const running = await startConsumer({ db, kafka, groupId, topics: [topic], member });
  try {
    await settled(running, count);
    const { processed, duplicates, mismatches, deadLettered } = running.consumer.stats();
    return { processed, duplicates, mismatches, deadLettered };
  } finally {
    await running.stop();
  }
}

const appliedBy = async (member: string) =>
  (await effects(db)).filter((e) => e.member === member).map((e) => e.seq);

describe('Kafka, default keys, topic deleted and recreated', () => {
  it("the new topic's records are applied, not taken for the old topic's", async () => {
    const topic = unique('recreate-keys');
    const groupId = unique('g-recreate-keys');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    await produce(kafka, topic, seqs(0, 1));
    await consume(groupId, topic, 'a', 2);
    expect(await appliedBy('a')).toEqual([0, 1]);

    await recreateTopic(kafka, topic);
    // Offsets 0 and 1 again: a new value, then the very bytes of the old offset 1.
    await produce(kafka, topic, seqs(100, 1));

    const b = await consume(groupId, topic, 'b', 2);
    expect({ appliedByB: await appliedBy('b'), ...b }).toEqual({
      appliedByB: [100, 1],
      processed: 2,
      duplicates: 0,
      mismatches: 0,
      deadLettered: 0,
    });
  }, 120_000);

  it('a redelivery of the same record is still a duplicate', async () => {
    const topic = unique('redeliver-keys');
    const groupId = unique('g-redeliver-keys');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    await produce(kafka, topic, seqs(0, 1));
    await consume(groupId, topic, 'c', 2);

    // An operator replays the topic: the same records, delivered again.
    await resetToEarliest(kafka, groupId, topic);
    const d = await consume(groupId, topic, 'd', 2);
    expect({ appliedByD: await appliedBy('d'), ...d }).toEqual({
      appliedByD: [],
      processed: 0,
      duplicates: 2,
      mismatches: 0,
      deadLettered: 0,
    });
  }, 120_000);

  it('exactlyOnceEachMessage keys alike: the recreated topic is applied, a redelivery is not', async () => {
    const topic = unique('recreate-each');
    const groupId = unique('g-recreate-each');
    await db.pool.query('CREATE TABLE IF NOT EXISTS each_effects (run text, seq int)');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    /** One run of a kafkajs consumer with the wrapped handler, until `count` records settled. */
    const run = async (label: string, count: number) => {
      const consumer = kafka.consumer({ groupId, ...FAST_GROUP });
      const producer = kafka.producer();
      await Promise.all([consumer.connect(), producer.connect()]);
      const eo = exactlyOnceEachMessage<EachMessagePayload>(
        async ({ message }, { tx }) => {
          const { seq } = JSON.parse(message.value?.toString() ?? '') as { seq: number };
          await tx.query('INSERT INTO each_effects (run, seq) VALUES ($1, $2)', [label, seq]);
        },
        { name: 'kafka-each-it', pool: db.pool, schema: db.schema, producer },
      );
      try {
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
        await consumer.run({ eachMessage: eo.eachMessage });
        await waitFor(
          () => {
            const s = eo.consumer.stats();
            return s.processed + s.duplicates + s.deadLettered >= count;
          },
          { timeoutMs: 30_000, what: `${count} records settled` },
        );
        const { processed, duplicates, deadLettered } = eo.consumer.stats();
        const { rows } = await db.pool.query<{ seq: number }>(
          'SELECT seq FROM each_effects WHERE run = $1 ORDER BY seq',
          [label],
        );
        return { applied: rows.map((r) => r.seq), processed, duplicates, deadLettered };
      } finally {
        await consumer.disconnect();
        await eo.stop();
        await producer.disconnect();
      }
    };

    await produce(kafka, topic, seqs(0, 1));
    expect(await run('old', 2)).toMatchObject({ applied: [0, 1], processed: 2 });
    await resetToEarliest(kafka, groupId, topic);
    expect(await run('replay', 2)).toEqual({
      applied: [],
      processed: 0,
      duplicates: 2,
      deadLettered: 0,
    });
    await recreateTopic(kafka, topic);
    await produce(kafka, topic, seqs(100, 1));
    expect(await run('new', 2)).toEqual({
      applied: [1, 100],
      processed: 2,
      duplicates: 0,
      deadLettered: 0,
    });
  }, 180_000);
});
