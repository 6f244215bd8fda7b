/**
 * Issue 32, the admission floor on Kafka: a record processed once, its dedup row pruned by
 * the consumer's own retention, then delivered again (the group replayed from the
 * earliest offset). The record's timestamp says it was first sent longer ago than the
 * window: it is dead-lettered as expired, never applied again. On a `LogAppendTime` topic
 * the broker set the timestamp, so the floor is on by default.
 */
import { describe, expect, it } from '@jest/globals';
import type { EachMessagePayload, Kafka } from 'kafkajs';
import { DEAD_LETTER_HEADERS, exactlyOnceEachMessage } from '../../../adapters/kafka/index.js';
import { createConsumer, type ConsumerOptions } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FAST_GROUP,
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

/** Who applied the effect of `key` (the effects table is shared by the file's tests). */
async function effectsOf(key: string): Promise<string[]> {
  return (await effects(db)).filter((e) => e.key === key).map((e) => e.member);
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
      // The same retention as the replay's: the row carries this expiry, which the prune keeps.
      consumer: { retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 } },
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
      expect(await effectsOf('op-1')).toEqual(['a']);
      expect(second.calls).toEqual([]);
      expect(second.consumer.stats()).toMatchObject({ processed: 0, deadLettered: 1 });
      const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
      expect(header(letter!.headers, DEAD_LETTER_HEADERS.errorCode)).toBe('EO_DELIVERY_EXPIRED');
    } finally {
      await second.stop();
    }
  });

  it('floors a CreateTime record only when told to trust producer timestamps', async () => {
    const topic = unique('floor-ct');
    const groupId = unique('g-floor-ct');
    await createTopic(topic, 'CreateTime');
    // A producer may set any CreateTime: here two hours ago, a legitimate old record.
    const twoHoursAgo = String(Date.now() - 2 * 3_600_000);
    await produce(kafka, topic, [
      {
        partition: 0,
        value: JSON.stringify({ seq: 1 }),
        timestamp: twoHoursAgo,
        headers: { 'idempotency-key': 'op-ct' },
      },
    ]);
    const window = { retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 } };

    // Processed once, by a consumer that does not trust producer timestamps (the default).
    const first = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      name: 'floor-ct',
      client: 'kafkajs',
      consumer: window,
    });
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 1, {
        timeoutMs: 30_000,
        what: 'the old record processed: CreateTime is not floored by default',
      });
      expect(first.consumer.stats()).toMatchObject({ processed: 1, expired: 0 });
    } finally {
      await first.stop();
    }
    await pruneWindow('floor-ct', WINDOW_MS);
    await resetToEarliest(kafka, groupId, topic);

    const second = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'b',
      name: 'floor-ct',
      client: 'kafkajs',
      consumer: { ...window, admissionFloor: { producerTimestamps: true } },
    });
    const expired: number[] = [];
    second.consumer.on('expired', (e) => expired.push(e.firstSentAt.getTime()));
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 1, {
        timeoutMs: 30_000,
        what: 'the replayed record settled',
      });
      expect(await effectsOf('op-ct')).toEqual(['a']);
      expect(second.calls).toEqual([]);
      expect(expired).toEqual([Number(twoHoursAgo)]);
      const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
      expect(header(letter!.headers, DEAD_LETTER_HEADERS.errorCode)).toBe('EO_DELIVERY_EXPIRED');
    } finally {
      await second.stop();
    }
  });

  it('holds on exactlyOnceEachMessage too (a replayed LogAppendTime record)', async () => {
    const topic = unique('floor-each');
    const groupId = unique('g-floor-each');
    await createTopic(topic, 'LogAppendTime');
    await db.pool.query('CREATE TABLE IF NOT EXISTS each_effects (n int NOT NULL)');
    await produce(kafka, topic, [
      {
        partition: 0,
        value: JSON.stringify({ seq: 1 }),
        headers: { 'idempotency-key': 'op-each' },
      },
    ]);
    const run = async (extra: Pick<ConsumerOptions<EachMessagePayload>, 'retention'>) => {
      const consumer = kafka.consumer({ groupId, ...FAST_GROUP });
      const producer = kafka.producer();
      await Promise.all([consumer.connect(), producer.connect()]);
      const eo = exactlyOnceEachMessage<EachMessagePayload>(
        async (_payload, { tx }) => {
          await tx.query('INSERT INTO each_effects (n) VALUES (1)');
        },
        { name: 'floor-each', pool: db.pool, schema: db.schema, producer, ...extra },
      );
      try {
        await consumer.subscribe({ topics: [topic], fromBeginning: true });
        await consumer.run({ eachMessage: eo.eachMessage });
        await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 1, {
          timeoutMs: 30_000,
          what: 'the record settled',
        });
        return eo.consumer.stats();
      } finally {
        await consumer.disconnect();
        await eo.stop();
        await producer.disconnect();
      }
    };

    expect(await run({ retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 } })).toMatchObject({
      processed: 1,
    });
    await pruneWindow('floor-each', WINDOW_MS);
    await resetToEarliest(kafka, groupId, topic);
    expect(await run({ retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 } })).toMatchObject({
      processed: 0,
      expired: 1,
      deadLettered: 1,
    });
    const { rows } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM each_effects',
    );
    expect(rows[0]!.n).toBe(1);
    const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
    expect(header(letter!.headers, DEAD_LETTER_HEADERS.errorCode)).toBe('EO_DELIVERY_EXPIRED');
  });

  // docs/keys-and-the-dedup-window.md, "Redriving an expired dead letter": why a redrive
  // must be decided letter by letter. The floor reads the redriven record's own timestamp.
  it('admits a redriven expired dead letter: its new record has a new timestamp', async () => {
    const topic = unique('floor-redrive');
    const groupId = unique('g-floor-redrive');
    await createTopic(topic, 'LogAppendTime');
    await produce(kafka, topic, [
      { partition: 0, value: JSON.stringify({ seq: 1 }), headers: { 'idempotency-key': 'op-r' } },
    ]);
    const start = (member: string, consumer: Partial<ConsumerOptions<unknown>> = {}) =>
      startConsumer({
        db,
        kafka,
        groupId,
        topics: [topic],
        member,
        name: 'floor-redrive',
        client: 'kafkajs',
        consumer,
      });
    // The same retention as the replay's: the row carries this expiry, which the prune keeps.
    const first = await start('a', { retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 } });
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 1, {
        timeoutMs: 30_000,
        what: 'the record processed and committed',
      });
    } finally {
      await first.stop();
    }
    await pruneWindow('floor-redrive', WINDOW_MS);
    await resetToEarliest(kafka, groupId, topic);

    const second = await start('b', { retention: { olderThanMs: WINDOW_MS, intervalMs: 60_000 } });
    try {
      await waitFor(() => second.consumer.stats().deadLettered === 1, {
        timeoutMs: 30_000,
        what: 'the replay dead-lettered as expired',
      });
      const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
      expect(header(letter!.headers, DEAD_LETTER_HEADERS.errorCode)).toBe('EO_DELIVERY_EXPIRED');
      const original = Number(header(letter!.headers, DEAD_LETTER_HEADERS.timestamp));
      expect(Date.now() - original).toBeGreaterThan(WINDOW_MS);

      // An operator redrives the letter as it is: key, value and every header.
      await produce(kafka, topic, [
        { key: letter!.key, value: letter!.value, headers: letter!.headers ?? {} },
      ]);
      await waitFor(() => second.consumer.stats().processed === 1, {
        timeoutMs: 30_000,
        what: 'the redriven letter applied',
      });
      expect(second.consumer.stats()).toMatchObject({ expired: 1, processed: 1 });
      expect(await effectsOf('op-r')).toEqual(['a', 'b']);
    } finally {
      await second.stop();
    }
  });
});
