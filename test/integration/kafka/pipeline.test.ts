/**
 * `pipeline`: consecutive records of one partition are handed to the runner together,
 * so batch mode can batch a strictly ordered partition. A retried record takes the
 * records handed over after it back, and they follow it: order and exactly-once hold.
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
kafkaTestEnv('kafka_pipeline', (env) => ({ db, kafka } = env));

const modes: Array<[string, Partial<ConsumerOptions<Body>>]> = [
  ['batch mode', { batch: { maxSize: 10, maxWaitMs: 5 } }],
  ['per-message mode', {}],
];

describe.each(modes)('Kafka: pipeline, %s', (mode, consumerOptions) => {
  it('keeps partition order and applies each record once while a record in the middle is retried', async () => {
    const topic = unique('pipe');
    const groupId = unique('g-pipe');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    const total = 60;
    await produce(
      kafka,
      topic,
      Array.from({ length: total }, (_, seq) => ({ partition: 0, value: JSON.stringify({ seq }) })),
    );
    await db.pool.query('TRUNCATE effects');
    const transactions = new Set<string>();
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      name: `pipe-${mode}`,
      source: { pipeline: 10 },
      consumer: consumerOptions,
      before: async (body, ctx) => {
        const { rows } = await ctx.tx.query<{ tx: string }>('SELECT txid_current()::text AS tx');
        transactions.add(rows[0]!.tx);
        if (body.seq === 25 && ctx.attempt < 3)
          throw new Error(`record 25 fails attempt ${ctx.attempt}`);
      },
    });
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === total, {
        timeoutMs: 60_000,
        what: 'every record committed',
      });
      expect(await doubleEffects(db)).toEqual([]);
      const applied = (await effects(db)).map((e) => e.seq);
      expect(applied).toEqual(Array.from({ length: total }, (_, seq) => seq));
      const attemptsOf25 = running.calls.filter((c) => c.offset === '25').map((c) => c.attempt);
      expect(attemptsOf25.slice(-1)).toEqual([3]);
      if (mode === 'batch mode') expect(transactions.size).toBeLessThan(total / 2);
    } finally {
      await running.stop();
    }
  }, 90_000);
});

describe('Kafka: pipeline, batch mode, a retry while a later record is gathered', () => {
  it('releases the gathered record rather than apply it ahead of the retried one', async () => {
    const topic = unique('pipe-hold');
    const groupId = unique('g-pipe-hold');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    const total = 3;
    await produce(
      kafka,
      topic,
      Array.from({ length: total }, (_, seq) => ({ partition: 0, value: JSON.stringify({ seq }) })),
    );
    await db.pool.query('TRUNCATE effects');
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      name: 'pipe-hold',
      // Records 0 and 1 fill a batch; record 2, handed over while it runs, waits in the
      // next one for maxWaitMs, long after record 0 failed and its batch settled.
      source: { pipeline: 3 },
      consumer: { batch: { maxSize: 2, maxWaitMs: 1500 } },
      before: (body, ctx) => {
        if (body.seq === 0 && ctx.attempt === 1) throw new Error('record 0 fails once');
        return Promise.resolve();
      },
    });
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === total, {
        timeoutMs: 30_000,
        what: 'every record committed',
      });
      expect(await doubleEffects(db)).toEqual([]);
      expect((await effects(db)).map((e) => e.seq)).toEqual([0, 1, 2]);
    } finally {
      await running.stop();
    }
  }, 60_000);
});
