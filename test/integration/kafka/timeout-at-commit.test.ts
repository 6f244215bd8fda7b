/**
 * A record whose session the server ends (idle_in_transaction_session_timeout, 25P03)
 * while its handler keeps the event loop busy, so the FATAL is the answer to COMMIT.
 * Kafka counts a record's attempts only for the record's own failures: filed as "commit
 * outcome unknown" (infrastructure), the record was retried in place for ever, never
 * dead-lettered, and the partition behind it never moved. Settled by the claim's xid
 * it is a known rollback, the record's failure: dead-lettered at `maxAttempts`, and the
 * records behind it apply.
 */
import { describe, expect, it } from '@jest/globals';
import type { Kafka } from 'kafkajs';
import pg from 'pg';
import { kafkaSource } from '../../../adapters/kafka/index.js';
import { createConsumer, type EffectivelyOnceError } from '../../../src/index.js';
import { blockUntilBackendGone } from '../../helpers/block-until-backend-gone.js';
import type { TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
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

const IDLE_MS = 300;

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_timeout_commit', (env) => ({ db, kafka } = env));

describe('kafkaSource: a session timeout whose FATAL answers COMMIT', () => {
  it('the record is dead-lettered after maxAttempts and the partition moves on', async () => {
    const timed = new pg.Pool({
      connectionString: databaseUrl(),
      max: 5,
      options: `-c search_path=${db.schema} -c idle_in_transaction_session_timeout=${IDLE_MS}`,
    });
    timed.on('error', () => undefined);
    const topic = unique('timeout-commit');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    await produce(
      kafka,
      topic,
      [0, 1, 2].map((seq) => ({ value: JSON.stringify({ seq }) })),
    );
    const failures: Array<{ attempt: number; error: EffectivelyOnceError }> = [];
    const deadLettered: string[] = [];
    const consumer = createConsumer<Body>({
      name: 'timeout-commit',
      pool: timed,
      schema: db.schema,
      maxAttempts: 2,
      backoff: { initialMs: 20, maxMs: 50 },
      handler: async (body, ctx) => {
        const started = performance.timeOrigin + performance.now();
        await applyEffect('a', body, ctx, started);
        if (body.seq !== 0) return;
        // The handler's last act: the next statement on the session is the COMMIT.
        const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        blockUntilBackendGone(rows[0]!.pid);
      },
      source: kafkaSource<Body>({
        kafka,
        groupId: unique('g-timeout-commit'),
        topics: [topic],
        fromBeginning: true,
        // The handler blocks the event loop (heartbeats too) for a moment: no rebalance.
        consumerConfig: { ...FAST_GROUP, sessionTimeout: 30_000, rebalanceTimeout: 30_000 },
        commitIntervalMs: 100,
        redeliveryDelayMs: 10,
      }),
    });
    consumer.on('failed', (f) => failures.push(f));
    consumer.on('dead-lettered', (d) => deadLettered.push(d.error.code));
    await consumer.start();
    try {
      await waitFor(
        async () =>
          (await effects(db)).filter((e) => e.topic === topic).length === 2 || failures.length >= 6,
        { timeoutMs: 60_000, what: 'the partition moved on, or record 0 looping' },
      );
      expect({
        applied: (await effects(db)).filter((e) => e.topic === topic).map((e) => e.seq),
        deadLettered,
        seen: failures.map((f) => `${f.attempt}:${f.error.code}`),
      }).toEqual({
        applied: [1, 2],
        deadLettered: ['EO_TX_ABORTED'],
        seen: ['1:EO_TX_ABORTED', '2:EO_TX_ABORTED'],
      });
    } finally {
      await consumer.stop({ timeoutMs: 10_000 });
      await timed.end();
    }
  }, 120_000);
});
