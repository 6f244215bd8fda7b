/**
 * Issue 4, test 1: the same logical operation produced several times with one
 * `idempotency-key` header (retrying producers) has its effect applied once.
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
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_idem', (env) => ({ db, kafka } = env));

describe('Kafka: idempotency-key header', () => {
  it('applies the effect once per key, however often and wherever the operation was produced', async () => {
    const topic = unique('idem');
    const groupId = unique('g-idem');
    await createTopics(kafka, [{ topic, partitions: 2 }]);
    // 5 operations, each produced 3 times (to both partitions, at different times), plus 5 key-less records.
    const sends = [];
    for (let copy = 0; copy < 3; copy++) {
      for (let op = 0; op < 5; op++) {
        sends.push({
          partition: (op + copy) % 2,
          value: JSON.stringify({ seq: op }),
          headers: { 'idempotency-key': `op-${op}` },
        });
      }
    }
    for (let i = 0; i < 5; i++)
      sends.push({ partition: i % 2, value: JSON.stringify({ seq: 100 + i }) });
    await produce(kafka, topic, sends);

    const running = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'a' });
    try {
      await waitFor(
        async () => {
          const offsets = await committedOffsets(kafka, groupId, topic);
          return (offsets.get(0) ?? 0) + (offsets.get(1) ?? 0) === 20;
        },
        { timeoutMs: 30_000, what: 'all 20 records committed' },
      );
      expect(await doubleEffects(db)).toEqual([]);
      expect(await effectCount(db)).toBe(10);
      const keys = (await effects(db)).map((e) => e.key).sort();
      expect(keys.filter((k) => k.startsWith('op-'))).toEqual([
        'op-0',
        'op-1',
        'op-2',
        'op-3',
        'op-4',
      ]);
      // Key-less records are keyed by their position.
      expect(keys.filter((k) => !k.startsWith('op-'))).toHaveLength(5);
      expect(keys.find((k) => !k.startsWith('op-'))).toMatch(
        new RegExp(`^${topic}/[01]/\\d+/\\d+$`),
      );
      const stats = running.consumer.stats();
      expect(stats.processed).toBe(10);
      expect(stats.duplicates).toBe(10);
      expect(stats.mismatches).toBe(0);
    } finally {
      await running.stop();
    }
  }, 60_000);
});
