/**
 * Issue 4, test 4: a failing record is retried in place, then dead-lettered with its
 * provenance headers, and the partition moves on past it. An undecodable record goes
 * to the dead-letter topic at once, without reaching the handler.
 */
import { describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import { DEAD_LETTER_HEADERS } from '../../../adapters/kafka/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  createTopics,
  effects,
  header,
  kafkaTestEnv,
  produce,
  readTopic,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_dlq', (env) => ({ db, kafka } = env));

describe('Kafka: retries and the dead-letter topic', () => {
  it('retries a failing record in place, dead-letters it with its headers, and moves on', async () => {
    const topic = unique('dlq');
    const groupId = unique('g-dlq');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    await produce(kafka, topic, [
      { partition: 0, value: JSON.stringify({ seq: 0 }) },
      {
        partition: 0,
        key: 'poison',
        value: JSON.stringify({ seq: 1, fail: true }),
        headers: { 'idempotency-key': 'op-poison', trace: 't-1' },
      },
      { partition: 0, value: '{"seq": 2, oops' },
      { partition: 0, value: JSON.stringify({ seq: 3 }) },
    ]);

    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      consumer: { maxAttempts: 3, backoff: { initialMs: 100, maxMs: 100, jitter: false } },
      before: async (body) => {
        if (body.fail) throw new Error('card declined');
      },
    });
    const deadLettered: number[] = [];
    running.consumer.on('dead-lettered', ({ attempt }) => deadLettered.push(attempt));
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 4, {
        timeoutMs: 30_000,
        what: 'the partition to be committed past every record',
      });
      // The good records took effect, in order; the poison one never did.
      expect((await effects(db)).map((e) => e.seq)).toEqual([0, 3]);
      // Three attempts, one after another, at least the backoff apart.
      const poison = running.calls.filter((c) => c.key === 'op-poison');
      expect(poison.map((c) => c.attempt)).toEqual([1, 2, 3]);
      // Record 3 was only handled after the poison record was settled: order is kept.
      const order = running.calls.map((c) => c.offset);
      expect(order.indexOf('3')).toBeGreaterThan(order.lastIndexOf('1'));
      // The undecodable record never reached the handler.
      expect(order).not.toContain('2');
      expect(deadLettered.sort()).toEqual([1, 3]);

      const letters = await readTopic(kafka, `${topic}.dlq`, 2);
      const byOffset = new Map(
        letters.map((m) => [header(m.headers, DEAD_LETTER_HEADERS.offset), m]),
      );
      const poisoned = byOffset.get('1');
      expect(poisoned?.key?.toString()).toBe('poison');
      expect(JSON.parse(poisoned?.value?.toString() ?? 'null')).toEqual({ seq: 1, fail: true });
      expect(header(poisoned?.headers, 'idempotency-key')).toBe('op-poison');
      expect(header(poisoned?.headers, 'trace')).toBe('t-1');
      expect(header(poisoned?.headers, DEAD_LETTER_HEADERS.topic)).toBe(topic);
      expect(header(poisoned?.headers, DEAD_LETTER_HEADERS.partition)).toBe('0');
      expect(header(poisoned?.headers, DEAD_LETTER_HEADERS.attempts)).toBe('3');
      expect(header(poisoned?.headers, DEAD_LETTER_HEADERS.errorCode)).toBe('EO_HANDLER');
      expect(header(poisoned?.headers, DEAD_LETTER_HEADERS.error)).toContain('card declined');
      const unparsable = byOffset.get('2');
      expect(unparsable?.value?.toString()).toBe('{"seq": 2, oops');
      expect(header(unparsable?.headers, DEAD_LETTER_HEADERS.errorCode)).toBe('EO_BODY_PARSE');
      expect(header(unparsable?.headers, DEAD_LETTER_HEADERS.attempts)).toBe('1');
    } finally {
      await running.stop();
    }
  }, 60_000);
});
