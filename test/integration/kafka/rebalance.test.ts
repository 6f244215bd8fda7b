/**
 * Issue 4, test 3: a second member joins mid-stream (rebalance) and later leaves
 * (rebalance again). Every record's effect is applied exactly once and each
 * partition's effects follow its offsets, across both hand-overs.
 */
import { describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import type { TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import {
  assigned,
  committedOffsets,
  createTopics,
  doubleEffects,
  effects,
  startConsumer,
  unique,
  type RunningConsumer,
  kafkaTestEnv,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_rebalance', (env) => ({ db, kafka } = env));

const PARTITIONS = 4;

describe('Kafka: rebalance', () => {
  it('keeps every effect exactly once and in partition order while a member joins and leaves', async () => {
    const topic = unique('rebalance');
    const groupId = unique('g-rebalance');
    await createTopics(kafka, [{ topic, partitions: PARTITIONS }]);
    // A producer keeps writing one record per partition every 40 ms, so both hand-overs
    // happen mid-stream, with records buffered and in flight.
    const producer = kafka.producer();
    await producer.connect();
    const nextSeq = Array.from({ length: PARTITIONS }, () => 0);
    let produced = 0;
    let producing = true;
    const producerLoop = (async () => {
      while (producing) {
        const messages = nextSeq.map((seq, partition) => ({
          partition,
          value: JSON.stringify({ seq }),
        }));
        await producer.send({ topic, messages, acks: -1 });
        for (let p = 0; p < PARTITIONS; p++) nextSeq[p] = (nextSeq[p] ?? 0) + 1;
        produced += PARTITIONS;
        await sleep(40);
      }
    })();
    const before = () => sleep(4);
    const start = (member: string) =>
      startConsumer({ db, kafka, groupId, topics: [topic], member, before });
    const appliedBy = async (member: string, afterId = 0) =>
      (await effects(db)).filter((e) => e.member === member && e.id > afterId).length;

    const a = await start('a');
    let b: RunningConsumer | undefined;
    try {
      await assigned(a, PARTITIONS);
      await waitFor(async () => (await appliedBy('a')) >= 30, {
        timeoutMs: 30_000,
        what: 'a to be under way',
      });

      b = await start('b');
      const bHalf = () => b?.source.partitions().length === PARTITIONS / 2;
      await waitFor(() => bHalf() && a.source.partitions().length === PARTITIONS / 2, {
        timeoutMs: 30_000,
        what: 'a and b to share the partitions',
      });
      const mine = new Set(a.source.partitions().map((p) => p.partition));
      expect(b.source.partitions().some((p) => mine.has(p.partition))).toBe(false);
      await waitFor(async () => (await appliedBy('b')) >= 20, {
        timeoutMs: 30_000,
        what: 'b to apply effects',
      });

      await b.stop();
      const lastId = Math.max(0, ...(await effects(db)).map((e) => e.id));
      await waitFor(() => a.source.partitions().length === PARTITIONS, {
        timeoutMs: 30_000,
        what: 'a to take every partition back',
      });
      await waitFor(async () => (await appliedBy('a', lastId)) >= 20, {
        timeoutMs: 30_000,
        what: 'a to go on alone',
      });

      producing = false;
      await producerLoop;
      await waitFor(
        async () => {
          const offsets = await committedOffsets(kafka, groupId, topic);
          return [...offsets.values()].reduce((s, o) => s + Math.max(o, 0), 0) === produced;
        },
        { timeoutMs: 60_000, what: 'every record committed' },
      );

      expect(await doubleEffects(db)).toEqual([]);
      const rows = await effects(db);
      expect(rows).toHaveLength(produced);
      for (let p = 0; p < PARTITIONS; p++) {
        const ofPartition = rows.filter((r) => r.part === p);
        expect(ofPartition.map((r) => r.seq)).toEqual(
          Array.from({ length: ofPartition.length }, (_, i) => i),
        );
        expect(ofPartition.map((r) => r.kafka_offset)).toEqual(ofPartition.map((r) => r.seq));
      }
      const members = new Set(rows.map((r) => r.member));
      expect(members).toEqual(new Set(['a', 'b']));
      // Redeliveries after the hand-overs were recognised, not re-applied.
      const stats = [a.consumer.stats(), b.consumer.stats()];
      expect(stats.reduce((s, x) => s + x.processed, 0)).toBe(produced);
    } finally {
      producing = false;
      await producerLoop.catch(() => undefined);
      await producer.disconnect();
      await b?.stop();
      await a.stop();
    }
  }, 60_000);
});
