/**
 * Issue 4, test 6: with `keyConcurrency`, records of different Kafka keys in one
 * partition are handled at the same time, while the records of each key stay in order.
 */
import { describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import type { TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  createTopics,
  doubleEffects,
  effects,
  kafkaTestEnv,
  produce,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_keys', (env) => ({ db, kafka } = env));

describe('Kafka: keyConcurrency', () => {
  it('overlaps different keys of one partition and keeps each key in order', async () => {
    const topic = unique('keys');
    const groupId = unique('g-keys');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    const keys = ['alpha', 'beta', 'gamma'];
    const perKey = 8;
    await produce(
      kafka,
      topic,
      Array.from({ length: keys.length * perKey }, (_, i) => ({
        partition: 0,
        key: keys[i % keys.length] as string,
        value: JSON.stringify({ seq: Math.floor(i / keys.length) }),
      })),
    );
    let active = 0;
    let maxActive = 0;
    const activeByKey = new Map<string, number>();
    let sameKeyOverlap = false;
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      source: { keyConcurrency: 3 },
      before: async (_body, ctx) => {
        const kafkaKey = String((ctx.delivery.raw as { key: Buffer }).key);
        active++;
        maxActive = Math.max(maxActive, active);
        activeByKey.set(kafkaKey, (activeByKey.get(kafkaKey) ?? 0) + 1);
        if ((activeByKey.get(kafkaKey) ?? 0) > 1) sameKeyOverlap = true;
        await sleep(25);
        activeByKey.set(kafkaKey, (activeByKey.get(kafkaKey) ?? 1) - 1);
        active--;
      },
    });
    try {
      await waitFor(
        async () => (await committedOffsets(kafka, groupId, topic)).get(0) === keys.length * perKey,
        {
          timeoutMs: 30_000,
          what: 'every record committed',
        },
      );
      expect(await doubleEffects(db)).toEqual([]);
      const rows = await effects(db);
      expect(rows).toHaveLength(keys.length * perKey);
      // Different keys overlapped...
      expect(maxActive).toBeGreaterThanOrEqual(2);
      expect(maxActive).toBeLessThanOrEqual(3);
      // ...but never two records of one key, and each key's effects follow its offsets.
      expect(sameKeyOverlap).toBe(false);
      for (let k = 0; k < keys.length; k++) {
        const ofKey = rows.filter((r) => r.kafka_offset % keys.length === k);
        expect(ofKey.map((r) => r.seq)).toEqual(Array.from({ length: perKey }, (_, i) => i));
        for (let i = 1; i < ofKey.length; i++) {
          expect((ofKey[i] as { started_ms: number }).started_ms).toBeGreaterThanOrEqual(
            (ofKey[i - 1] as { finished_ms: number }).finished_ms - 1,
          );
        }
      }
    } finally {
      await running.stop();
    }
  }, 60_000);
});
