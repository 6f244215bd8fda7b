/**
 * Issue 32, the admission floor on Kafka: a record processed once, its dedup row pruned by
 * the consumer's own retention, then delivered again (the group replayed from the
 * earliest offset). The record's timestamp says it was first sent longer ago than the
 * window: it is dead-lettered as expired, never applied again. On a `LogAppendTime` topic
 * the broker set the timestamp, so the floor is on by default.
 */
import { describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import { DEAD_LETTER_HEADERS } from '../../../adapters/kafka/index.js';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  effects,
  header,
  kafkaTestEnv,
  produce,
  readTopic,
  resetToEarliest,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_floor', (env) => ({ db, kafka } = env));

/** The window of the test: short, so the record outgrows it in seconds. */
const WINDOW_MS = 3000;

/** A topic (with its dead-letter topic) whose timestamps are `type`. */
async function createTopic(topic: string, type: 'CreateTime' | 'LogAppendTime'): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: [
        {
          topic,
          numPartitions: 1,
          configEntries: [{ name: 'message.timestamp.type', value: type }],
        },
        { topic: `${topic}.dlq`, numPartitions: 1 },
      ],
      waitForLeaders: true,
    });
  } finally {
    await admin.disconnect();
  }
}

/** The consumer's own retention, run until it pruned the row of the earlier processing. */
async function pruneWindow(name: string, olderThanMs: number): Promise<void> {
  const pruner = createConsumer({
    name,
    pool: db.pool,
    schema: db.schema,
    source: memorySource(),
    handler: async () => undefined,
    retention: { olderThanMs, intervalMs: 100 },
  });
  await pruner.start();
  try {
    await waitFor(() => pruner.stats().pruned === 1, { what: 'the row pruned', timeoutMs: 30_000 });
  } finally {
    await pruner.stop();
  }
}

describe('Kafka: the admission floor', () => {
  it('dead-letters a replayed LogAppendTime record older than the window, once pruned', async () => {
    const topic = unique('floor-lat');
    const groupId = unique('g-floor-lat');
    await createTopic(topic, 'LogAppendTime');
    await produce(kafka, topic, [
      { partition: 0, value: JSON.stringify({ seq: 1 }), headers: { 'idempotency-key': 'op-1' } },
    ]);

    // kafkajs tells the timestamp type; the platformatic client does not (see the docs).
    const first = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      name: 'floor',
      client: 'kafkajs',
    });
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 1, {
        timeoutMs: 30_000,
        what: 'the record processed and committed',
      });
    } finally {
      await first.stop();
    }
    await pruneWindow('floor', WINDOW_MS);
    await resetToEarliest(kafka, groupId, topic);

    const second = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'b',
      name: 'floor',
      client: 'kafkajs',
      consumer: { retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 } },
    });
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 1, {
        timeoutMs: 30_000,
        what: 'the replayed record settled',
      });
      await waitFor(
        () => second.consumer.stats().processed + second.consumer.stats().deadLettered === 1,
        { what: 'the replayed record counted' },
      );
      expect((await effects(db)).map((e) => e.member)).toEqual(['a']);
      expect(second.calls).toEqual([]);
      expect(second.consumer.stats()).toMatchObject({ processed: 0, deadLettered: 1 });
      const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
      expect(header(letter!.headers, DEAD_LETTER_HEADERS.errorCode)).toBe('EO_DELIVERY_EXPIRED');
    } finally {
      await second.stop();
    }
  });
});
