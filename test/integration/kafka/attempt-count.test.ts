/**
 * Issue 11: the Kafka attempt count (`ctx.attempt`, which `maxAttempts` is checked
 * against) counts handler failures only. Retries for a busy claim or a connection that
 * died under the handler do not raise it, so a record is not dead-lettered at its
 * first real failure. Same in exactlyOnceEachMessage.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import type { EachMessagePayload, Kafka } from 'kafkajs';
import type pg from 'pg';
import { exactlyOnceEachMessage } from '../../../adapters/kafka/index.js';
import { migrate } from '../../../src/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FAST_GROUP,
  createTopics,
  kafkaTestEnv,
  produce,
  startConsumer,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_attempts', (env) => ({ db, kafka } = env));
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** Holds `key`'s claim row in an open transaction, so claims of it time out (EO_CLAIM_BUSY). */
async function holdClaim(consumer: string, key: string): Promise<() => Promise<void>> {
  await migrate(db.pool, { schema: db.schema });
  const blocker: pg.PoolClient = await db.pool.connect();
  await blocker.query('BEGIN');
  await blocker.query('INSERT INTO processed_messages (consumer, message_key) VALUES ($1, $2)', [
    consumer,
    key,
  ]);
  let held = true;
  const release = async () => {
    if (!held) return;
    held = false;
    await blocker.query('ROLLBACK');
    blocker.release();
  };
  cleanups.push(release);
  return release;
}

/** Effects applied for `key` (the effects table is shared by the file's tests). */
async function effectsOf(key: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM effects WHERE key = $1',
    [key],
  );
  return rows[0]!.n;
}

async function topicWithOneRecord(prefix: string, key: string): Promise<string> {
  const topic = unique(prefix);
  await createTopics(kafka, [{ topic, partitions: 1 }]);
  await produce(kafka, topic, [
    { value: JSON.stringify({ seq: 1 }), headers: { 'idempotency-key': key } },
  ]);
  return topic;
}

describe('kafkaSource: ctx.attempt counts handler failures only', () => {
  it('busy claims do not count: maxAttempts 2 survives one real failure after several busy retries', async () => {
    const key = unique('busy');
    const topic = await topicWithOneRecord('attempt-busy', key);
    const release = await holdClaim('kafka-attempts', key);
    let failNext = true;
    const deadLettered: unknown[] = [];
    const running = await startConsumer({
      db,
      kafka,
      groupId: unique('g-attempt-busy'),
      topics: [topic],
      member: 'a',
      name: 'kafka-attempts',
      consumer: { maxAttempts: 2, lockTimeoutMs: 200, busyRetryDelayMs: 50 },
      before: async () => {
        if (failNext) {
          failNext = false;
          throw new Error('a real handler failure');
        }
      },
    });
    cleanups.push(() => running.stop());
    running.consumer.on('dead-lettered', (e) => deadLettered.push(e));
    await waitFor(() => running.consumer.stats().busy >= 3, {
      timeoutMs: 30_000,
      what: 'three busy claims',
    });
    await release();
    await waitFor(async () => (await effectsOf(key)) === 1 || deadLettered.length > 0, {
      timeoutMs: 30_000,
      what: 'the record applied or dead-lettered',
    });
    expect(deadLettered).toEqual([]);
    expect(running.calls.map((c) => c.attempt)).toEqual([1, 2]);
    expect(await effectsOf(key)).toBe(1);
  }, 90_000);

  it('a connection killed under the handler does not count: maxAttempts 1 still applies the record', async () => {
    const key = unique('killed');
    const topic = await topicWithOneRecord('attempt-killed', key);
    let killed = false;
    const deadLettered: unknown[] = [];
    const running = await startConsumer({
      db,
      kafka,
      groupId: unique('g-attempt-killed'),
      topics: [topic],
      member: 'a',
      name: 'kafka-attempts-killed',
      consumer: { maxAttempts: 1 },
      before: async (_body, ctx) => {
        if (killed) return;
        killed = true;
        const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const pid = rows[0]!.pid;
        await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await waitFor(
          async () =>
            (await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]))
              .rowCount === 0,
          { what: 'backend gone' },
        );
      },
    });
    cleanups.push(() => running.stop());
    running.consumer.on('dead-lettered', (e) => deadLettered.push(e));
    await waitFor(async () => (await effectsOf(key)) === 1 || deadLettered.length > 0, {
      timeoutMs: 30_000,
      what: 'the record applied or dead-lettered',
    });
    expect(deadLettered).toEqual([]);
    expect(running.calls.map((c) => c.attempt)).toEqual([1, 1]);
    expect(await effectsOf(key)).toBe(1);
  }, 90_000);
});

describe('exactlyOnceEachMessage: ctx.attempt counts handler failures only', () => {
  it('busy claims do not count: maxAttempts 2 survives one real failure after several busy retries', async () => {
    const key = unique('each-busy');
    const topic = await topicWithOneRecord('each-attempt', key);
    const release = await holdClaim('each-attempts', key);
    const attempts: number[] = [];
    const consumer = kafka.consumer({ groupId: unique('g-each-attempt'), ...FAST_GROUP });
    const producer = kafka.producer();
    await Promise.all([consumer.connect(), producer.connect()]);
    const eo = exactlyOnceEachMessage<EachMessagePayload>(
      async ({ message }, ctx) => {
        attempts.push(ctx.attempt);
        if (attempts.length === 1) throw new Error('a real handler failure');
        await ctx.tx.query(
          `INSERT INTO effects (key, member, topic, part, kafka_offset, started_ms, finished_ms)
           VALUES ($1, 'each', $2, 0, $3, 0, 0)`,
          [ctx.key, topic, message.offset],
        );
      },
      {
        name: 'each-attempts',
        pool: db.pool,
        schema: db.schema,
        producer,
        maxAttempts: 2,
        lockTimeoutMs: 200,
        busyRetryDelayMs: 50,
        backoff: { initialMs: 20, maxMs: 20 },
      },
    );
    const deadLettered: unknown[] = [];
    eo.consumer.on('dead-lettered', (e) => deadLettered.push(e));
    cleanups.push(async () => {
      await consumer.disconnect();
      await eo.stop();
      await producer.disconnect();
    });
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ eachMessage: eo.eachMessage });
    await waitFor(() => eo.consumer.stats().busy >= 3, {
      timeoutMs: 30_000,
      what: 'three busy claims',
    });
    await release();
    await waitFor(async () => (await effectsOf(key)) === 1 || deadLettered.length > 0, {
      timeoutMs: 30_000,
      what: 'the record applied or dead-lettered',
    });
    expect(deadLettered).toEqual([]);
    expect(attempts).toEqual([1, 2]);
    expect(await effectsOf(key)).toBe(1);
  }, 90_000);
});
