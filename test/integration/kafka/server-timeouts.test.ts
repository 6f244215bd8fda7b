/**
 * Issue 32, defect 3, end to end on Kafka with `offsets: 'postgres'`: a record whose
 * handler is slower than the server's `idle_in_transaction_session_timeout` (25P03),
 * or that runs `SET TRANSACTION READ ONLY` so the stored offset's write fails (25006),
 * is the record's failure: its attempts are spent, it is dead-lettered at
 * `maxAttempts: 2`, and the partition moves on. Both used to be filed as
 * infrastructure: attempt stuck at 1, never dead-lettered, the partition blocked.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { Kafka } from 'kafkajs';
import { kafkaSource, migrateKafkaOffsets } from '../../../adapters/kafka/index.js';
import { createConsumer, type ConsumerOptions, type HandlerContext } from '../../../src/index.js';
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

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_server_timeouts', (env) => ({ db, kafka } = env));

/** The consumer's pool: the server ends a session idle in a transaction for 300 ms. */
let timed: pg.Pool;
beforeAll(async () => {
  await migrateKafkaOffsets(db.pool, { schema: db.schema });
  timed = new pg.Pool({
    connectionString: databaseUrl(),
    max: 5,
    options: `-c search_path=${db.schema} -c idle_in_transaction_session_timeout=300`,
  });
  timed.on('error', () => undefined);
});
afterAll(async () => timed.end());

/** What the poison record's handler does instead of its effect. */
const poisons: Array<[string, string, (ctx: HandlerContext<Body>) => Promise<void>]> = [
  [
    'slower than idle_in_transaction_session_timeout',
    'EO_TX_ABORTED',
    // Waits for the server to end the session (no fixed sleep): idle in its transaction.
    (ctx) => new Promise<void>((resolve) => ctx.tx.once('end', () => resolve())),
  ],
  [
    'SET TRANSACTION READ ONLY',
    'EO_TX_ABORTED',
    async (ctx) => void (await ctx.tx.query('SET TRANSACTION READ ONLY')),
  ],
];
const modes: Array<[string, Partial<ConsumerOptions<Body>>]> = [
  ['per message', {}],
  ['batch mode', { batch: { maxSize: 10, maxWaitMs: 20 } }],
];

describe.each(modes)("Kafka offsets: 'postgres', %s", (mode, consumerOptions) => {
  it.each(poisons)(
    'a record whose handler is %s spends its attempts, is dead-lettered, the partition moves on',
    async (what, code, poison) => {
      const topic = unique('srvto');
      const groupId = unique('g-srvto');
      await createTopics(kafka, [
        { topic, partitions: 1 },
        { topic: `${topic}.dlq`, partitions: 1 },
      ]);
      await produce(
        kafka,
        topic,
        [0, 1, 2].map((seq) => ({ partition: 0, value: JSON.stringify({ seq, fail: seq === 1 }) })),
      );
      await db.pool.query('TRUNCATE effects');
      const runsOfPoison: number[] = [];
      const deadLettered: string[] = [];
      const consumer = createConsumer<Body>({
        name: `srvto-${mode}-${what}`.slice(0, 60),
        pool: timed,
        schema: db.schema,
        maxAttempts: 2,
        backoff: { initialMs: 20, maxMs: 50 },
        ...consumerOptions,
        handler: async (body, ctx) => {
          const started = performance.timeOrigin + performance.now();
          if (body.fail === true) {
            runsOfPoison.push(ctx.attempt);
            await poison(ctx);
            return;
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
      await consumer.start();
      try {
        // Bounded: before the fix the poison record looped without end.
        await waitFor(async () => (await effects(db)).length === 2 || runsOfPoison.length > 12, {
          timeoutMs: 40_000,
          what: 'records 0 and 2 applied',
        });
        // Batch mode runs it more often on attempt 1 while bisecting its batch.
        expect(runsOfPoison.slice(-2)).toEqual([1, 2]);
        expect(deadLettered).toEqual([code]);
        expect((await effects(db)).map((e) => e.seq)).toEqual([0, 2]);
      } finally {
        await consumer.stop({ timeoutMs: 10_000 });
      }
    },
    60_000,
  );
});
