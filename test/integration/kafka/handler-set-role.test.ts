/**
 * Kafka `offsets: 'postgres'`: a handler that switches to a tenant role for row-level
 * security (`SET LOCAL ROLE tenant`, the usual RLS idiom) must not make the adapter's own
 * write of the stored offset, in the same transaction, fail (42501: the tenant may write
 * its own tables, not the library's offsets table). Filed as infrastructure, that failure
 * never spent an attempt: the record looped for ever and blocked its partition. The
 * library's in-transaction writes run as the session user whatever the handler set.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import { kafkaSource, migrateKafkaOffsets } from '../../../adapters/kafka/index.js';
import { createConsumer } from '../../../src/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  applyEffect,
  createTopics,
  effects,
  FAST_GROUP,
  kafkaTestEnv,
  produce,
  unique,
  type Body,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('handler_set_role', (env) => ({ db, kafka } = env));

const role = `tenant_${Math.random().toString(36).slice(2, 8)}`;
beforeAll(async () => {
  await migrateKafkaOffsets(db.pool, { schema: db.schema });
  await db.pool.query(`CREATE ROLE ${role} NOLOGIN`);
  await db.pool.query(`GRANT USAGE ON SCHEMA ${db.schema} TO ${role}`);
  await db.pool.query(`GRANT INSERT, SELECT ON ${db.table('effects')} TO ${role}`);
  await db.pool.query(`GRANT USAGE ON ALL SEQUENCES IN SCHEMA ${db.schema} TO ${role}`);
});
afterAll(async () => {
  await db.pool.query(`DROP OWNED BY ${role}`).catch(() => undefined);
  await db.pool.query(`DROP ROLE ${role}`).catch(() => undefined);
});

describe('a handler that runs SET LOCAL ROLE, with offsets: postgres', () => {
  it('applies its record once and the partition moves on', async () => {
    const topic = unique('setrole');
    const groupId = unique('g-setrole');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    await produce(
      kafka,
      topic,
      [0, 1, 2].map((seq) => ({ partition: 0, value: JSON.stringify({ seq, fail: seq === 1 }) })),
    );
    const runs: number[] = [];
    const deadLettered: string[] = [];
    const consumer = createConsumer<Body>({
      name: 'setrole',
      pool: db.pool,
      schema: db.schema,
      maxAttempts: 2,
      backoff: { initialMs: 20, maxMs: 50 },
      handler: async (body, ctx) => {
        const started = performance.timeOrigin + performance.now();
        if (body.fail === true) {
          runs.push(ctx.attempt);
          await ctx.tx.query(`SET LOCAL ROLE ${role}`);
        }
        await applyEffect('a', body, ctx, started);
      },
      source: kafkaSource<Body>({
        kafka,
        groupId,
        topics: [topic],
        fromBeginning: true,
        consumerConfig: FAST_GROUP,
        commitIntervalMs: 100,
        offsets: 'postgres',
        pool: db.pool,
        offsetsSchema: db.schema,
      }),
    });
    consumer.on('dead-lettered', (d) => deadLettered.push(d.error.code));
    const failures = new Set<string>();
    consumer.on('failed', (f) =>
      failures.add(
        `${f.error.code}: ${String((f.error.cause as Error | undefined)?.message ?? f.error.message)}`,
      ),
    );
    await consumer.start();
    try {
      await waitFor(async () => (await effects(db)).length >= 3 || runs.length > 12, {
        timeoutMs: 40_000,
        what: 'records 0, 1 and 2 applied, or record 1 looping',
      });
      expect({
        runs:
          runs.length > 12
            ? `${runs.length}+ runs, attempts ${[...new Set(runs)].join(',')}`
            : runs,
        deadLettered,
        failures: [...failures],
        applied: (await effects(db)).length,
      }).toEqual({ runs: [1], deadLettered: [], failures: [], applied: 3 });
    } finally {
      await consumer.stop({ timeoutMs: 10_000 });
    }
  }, 60_000);
});
