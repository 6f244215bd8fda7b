/**
 * Issue 25: the source over `@platformatic/kafka`, whose member dies after its effects
 * committed but before any offset was committed. A new member takes over from the last
 * committed offset: every redelivered record that had taken effect is a duplicate, and
 * nothing is lost.
 */
import { describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
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
  startConsumer,
  unique,
} from '../kafka/kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_plt_crash', (env) => ({ db, kafka } = env));

describe('Kafka over @platformatic/kafka: crash after the effect committed, before the offset did', () => {
  it('lets a new member take over with no double effect and nothing lost', async () => {
    const topic = unique('plt-crash');
    const groupId = unique('g-plt-crash');
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

    let releaseBlocked!: () => void;
    const blocked = new Promise<void>((resolve) => (releaseBlocked = resolve));
    let calls = 0;
    let waiting = 0;
    // Offsets committed only every minute: never before the crash.
    const a = await startConsumer({
      client: 'platformatic',
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      source: { commitIntervalMs: 60_000 },
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

      // The crash: the client closes under the source without committing an offset...
      await a.platformatic?.close(true);
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

      const b = await startConsumer({
        client: 'platformatic',
        db,
        kafka,
        groupId,
        topics: [topic],
        member: 'b',
      });
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
    }
  }, 60_000);
});
