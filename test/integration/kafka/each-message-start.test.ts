/**
 * Issue 11: a database blip during exactlyOnceEachMessage's first start (the migrate
 * the first record triggers) must not make every later record fail until the process
 * restarts: the next delivery (kafkajs retries the record) starts it again.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import type { EachMessagePayload, Kafka } from 'kafkajs';
import pg from 'pg';
import { exactlyOnceEachMessage } from '../../../adapters/kafka/index.js';
import { FaultProxy } from '../../../kit/fault-proxy.js';
import type { TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FAST_GROUP,
  createTopics,
  effectCount,
  kafkaTestEnv,
  produce,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_each_start', (env) => ({ db, kafka } = env));
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

describe('exactlyOnceEachMessage: a failed first start', () => {
  it('is retried by the next delivery instead of failing every record after it', async () => {
    const topic = unique('each-start');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    await produce(kafka, topic, [
      { value: JSON.stringify({ seq: 1 }), headers: { 'idempotency-key': 'start-1' } },
    ]);

    const target = new URL(databaseUrl());
    const proxy = await FaultProxy.create({
      target: { host: target.hostname, port: Number(target.port) },
    });
    cleanups.push(() => proxy.down());
    target.port = String(proxy.port);
    const pool = new pg.Pool({
      connectionString: target.toString(),
      options: `-c search_path=${db.schema}`,
      connectionTimeoutMillis: 2000,
    });
    pool.on('error', () => undefined);
    cleanups.push(() => pool.end().catch(() => undefined));

    const consumer = kafka.consumer({ groupId: unique('g-each-start'), ...FAST_GROUP });
    const producer = kafka.producer();
    await Promise.all([consumer.connect(), producer.connect()]);
    const eo = exactlyOnceEachMessage<EachMessagePayload>(
      async ({ message }, ctx) => {
        await ctx.tx.query(
          `INSERT INTO effects (key, member, topic, part, kafka_offset, started_ms, finished_ms)
           VALUES ($1, 'each', $2, 0, $3, 0, 0)`,
          [ctx.key, topic, message.offset],
        );
      },
      { name: 'each-start', pool, schema: db.schema, producer },
    );
    cleanups.push(async () => {
      await consumer.disconnect();
      await eo.stop();
      await producer.disconnect();
    });
    const failures: unknown[] = [];
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({
      eachMessage: async (payload) => {
        try {
          await eo.eachMessage(payload);
        } catch (error) {
          failures.push(error);
          // The database comes back right after the first record met it down.
          if (failures.length === 1) await proxy.up();
          throw error;
        }
      },
    });
    await waitFor(async () => (await effectCount(db)) > 0 || failures.length >= 6, {
      timeoutMs: 60_000,
      what: 'the effect, or repeated failures',
    });
    expect(failures.length).toBeLessThan(6);
    expect(await effectCount(db)).toBe(1);
  }, 90_000);
});
