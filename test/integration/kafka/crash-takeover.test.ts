/**
 * Issue 4, test 2: a member dies after its effects committed but before any offset
 * was committed; a new member of the group takes over from the last committed offset.
 * Every redelivered record that had taken effect is a duplicate; nothing is lost.
 */
import { describe, expect, it } from '@jest/globals';
import type { Consumer as KafkaJsConsumer, Kafka } from 'kafkajs';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FAST_GROUP,
  committedOffsets,
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
kafkaTestEnv('kafka_crash', (env) => ({ db, kafka } = env));

describe('Kafka: crash after the effect committed, before the offset did', () => {
  it('lets a new member take over with no double effect and nothing lost', async () => {
    const topic = unique('crash');
    const groupId = unique('g-crash');
    const total = 40;
    await createTopics(kafka, [{ topic, partitions: 2 }]);
    await produce(
      kafka,
      topic,
      Array.from({ length: total }, (_, i) => ({
        partition: i % 2,
        value: JSON.stringify({ seq: Math.floor(i / 2) }),
      })),
    );

    // Member a: its own kafkajs consumer (so the test can kill it; over @platformatic/kafka,
    // EO_KAFKA_CLIENT=platformatic, the helper's client is closed instead), offsets
    // committed only every minute, i.e. never before the crash.
    const rawA: KafkaJsConsumer | undefined =
      process.env['EO_KAFKA_CLIENT'] === 'platformatic'
        ? undefined
        : kafka.consumer({ groupId, ...FAST_GROUP });
    let killed = false;
    let releaseBlocked!: () => void;
    const blocked = new Promise<void>((resolve) => (releaseBlocked = resolve));
    let calls = 0;
    let waiting = 0;
    const a = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      source: {
        ...(rawA === undefined
          ? {}
          : { kafka: undefined, consumer: rawA, producer: kafka.producer() }),
        commitIntervalMs: 60_000,
      },
      before: async () => {
        // After 15 effects, the next record of each partition is held open while the member dies.
        if (++calls > 15) {
          waiting++;
          await blocked;
        }
      },
    });
    const errors: Error[] = [];
    a.consumer.on('error', (error) => errors.push(error));
    try {
      await waitFor(async () => waiting === 2 && (await effectCount(db)) === 15, {
        timeoutMs: 30_000,
        what: '15 effects of member a and one open transaction per partition',
      });
      expect(await committedOffsets(kafka, groupId, topic)).toEqual(
        new Map([
          [0, -1],
          [1, -1],
        ]),
      );

      // The crash: the member drops out of the group without committing an offset...
      if (rawA === undefined) await a.platformatic?.close(true);
      else await rawA.disconnect();
      killed = true;
      const stopping = a.stop();
      // ...and the two open transactions commit after it died: their offsets never can.
      releaseBlocked();
      await stopping;
      expect(await effectCount(db)).toBe(17);
      expect(await committedOffsets(kafka, groupId, topic)).toEqual(
        new Map([
          [0, -1],
          [1, -1],
        ]),
      );
      expect(errors.map((e) => e.message).join()).toMatch(/commit offsets/);

      const b = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'b' });
      try {
        await waitFor(
          async () => {
            const offsets = await committedOffsets(kafka, groupId, topic);
            return offsets.get(0) === total / 2 && offsets.get(1) === total / 2;
          },
          { timeoutMs: 30_000, what: 'b to commit every record' },
        );
        expect(await doubleEffects(db)).toEqual([]);
        const rows = await effects(db);
        expect(rows).toHaveLength(total);
        expect(rows.filter((r) => r.member === 'a')).toHaveLength(17);
        const stats = b.consumer.stats();
        expect(stats.duplicates).toBe(17);
        expect(stats.processed).toBe(total - 17);
        for (const p of [0, 1]) {
          expect(rows.filter((r) => r.part === p).map((r) => r.seq)).toEqual(
            Array.from({ length: total / 2 }, (_, i) => i),
          );
        }
      } finally {
        await b.stop();
      }
    } finally {
      releaseBlocked();
      await a.stop().catch(() => undefined);
      if (!killed) await rawA?.disconnect();
    }
  }, 60_000);
});
