import { afterAll, afterEach, beforeAll } from '@jest/globals';
import type { SQSClient } from '@aws-sdk/client-sqs';
import {
  createConsumer,
  type Consumer,
  type ConsumerEvents,
  type ConsumerOptions,
  type EffectivelyOnceError,
} from '../../../src/index.js';
import { sqsSource, type SqsSourceOptions } from '../../../adapters/sqs/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { TestQueues } from '../../helpers/sqs.js';
import { waitFor } from '../../helpers/wait-for.js';

// Explicit per test: a project-level testTimeout is not applied by jest.
export const TIMEOUT = 60_000;

/** One applied effect: the handler inserts the claimed key and the message it got. */
export interface EffectRow {
  key: string;
  message: unknown;
}

/** What a consumer reported while a test ran. */
export interface Observed {
  consumer: Consumer;
  deadLettered: Array<ConsumerEvents['dead-lettered']>;
  failed: Array<ConsumerEvents['failed']>;
  errors: EffectivelyOnceError[];
}

/** Subscribes to the events a bad-input test asserts on. */
export function observe(consumer: Consumer): Observed {
  const observed: Observed = { consumer, deadLettered: [], failed: [], errors: [] };
  consumer.on('dead-lettered', (e) => observed.deadLettered.push(e));
  consumer.on('failed', (e) => observed.failed.push(e));
  consumer.on('error', (e) => observed.errors.push(e));
  return observed;
}

/**
 * Per test file: a fresh schema with an `effects` table (no unique constraint: a double
 * shows as two rows), SQS queues created on demand, consumers stopped after each test.
 */
export function badInputSuite(file: string) {
  const state = {} as { db: TestDatabase; queues: TestQueues | undefined };
  const consumers: Consumer[] = [];

  beforeAll(async () => {
    state.db = await createTestDatabase(`bad_${file}`);
    await state.db.pool.query(
      'CREATE TABLE effects (n bigserial PRIMARY KEY, key text NOT NULL, message jsonb)',
    );
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop({ timeoutMs: 2_000 })));
    await state.db.pool.query('TRUNCATE effects');
    await state.db.pool.query('TRUNCATE processed_messages').catch(() => undefined);
  });
  afterAll(async () => {
    await state.queues?.cleanup();
    await state.db?.close();
  });

  return {
    get db() {
      return state.db;
    },
    /** Created on first use: Kafka-only files need no SQS endpoint. */
    get queues(): TestQueues {
      return (state.queues ??= new TestQueues());
    },
    /** Remembers a consumer created elsewhere so it is stopped after the test. */
    track(consumer: Consumer): Consumer {
      consumers.push(consumer);
      return consumer;
    },
    /** Consumer options that write one `effects` row per applied message, through ctx.tx. */
    options<T>(overrides: Partial<ConsumerOptions<T>> = {}): Omit<ConsumerOptions<T>, 'source'> {
      return {
        name: `bad-${file}`,
        pool: state.db.pool,
        schema: state.db.schema,
        backoff: { initialMs: 10, maxMs: 50 },
        busyRetryDelayMs: 100,
        handler: async (message, ctx) => {
          await ctx.tx.query('INSERT INTO effects (key, message) VALUES ($1, $2)', [
            ctx.key,
            JSON.stringify(message ?? null),
          ]);
        },
        ...overrides,
      };
    },
    /** Starts a consumer over `sqsSource` (1 s polls) and observes its events. */
    async sqsWorker<T = unknown>(
      source: Omit<SqsSourceOptions<T>, 'client'> & { client?: SQSClient },
      overrides: Partial<ConsumerOptions<T>> = {},
    ): Promise<Observed> {
      const consumer = createConsumer<T>({
        ...this.options<T>(overrides),
        source: sqsSource<T>({ client: this.queues.client, waitTimeSeconds: 1, ...source }),
      });
      consumers.push(consumer);
      const observed = observe(consumer);
      await consumer.start();
      return observed;
    },
    /** For {@link settled}: the queue holds nothing (visible, in flight or delayed). */
    empty(url: string): () => Promise<boolean> {
      return async () => (await this.queues.depth(url)).total === 0;
    },
    async effects(): Promise<EffectRow[]> {
      const { rows } = await state.db.pool.query<EffectRow>(
        'SELECT key, message FROM effects ORDER BY n',
      );
      return rows;
    },
    /** Keys claimed in the dedup table, as stored. */
    async claimedKeys(): Promise<string[]> {
      const { rows } = await state.db.pool.query<{ message_key: string }>(
        'SELECT message_key FROM processed_messages ORDER BY message_key',
      );
      return rows.map((r) => r.message_key);
    },
  };
}

/**
 * Waits until `count` deliveries were settled for good (processed, duplicate or
 * dead-lettered; events fire after the broker confirmed), then until `queueEmpty` says so.
 */
export async function settled(
  worker: Observed,
  count: number,
  queueEmpty?: () => Promise<boolean>,
): Promise<void> {
  await waitFor(
    () => {
      const s = worker.consumer.stats();
      return s.processed + s.duplicates + s.deadLettered >= count;
    },
    { what: `${count} deliveries settled` },
  );
  if (queueEmpty) await waitFor(queueEmpty, { what: 'queue empty' });
}

/** Keys a producer may well send: quotes, comment markers, placeholders, scripts, emoji, RTL, combining marks. */
export const AWKWARD_KEYS = [
  "'; DROP TABLE processed_messages; --",
  "Robert'); DELETE FROM effects WHERE ('1'='1",
  '" OR 1=1 --',
  '$1',
  '%s %n \\x00 \\\\',
  'ключ-🔑-鍵-مفتاح',
  'e\u0301 vs \u00e9',
  '\u202eRTL override',
  '👩‍👩‍👧‍👦',
  '  leading and trailing spaces  ',
  'tab\tand\nnewline',
];

/** An `Idempotency-Key` message attribute. */
export function keyAttribute(key: string): {
  'Idempotency-Key': { DataType: 'String'; StringValue: string };
} {
  return { 'Idempotency-Key': { DataType: 'String', StringValue: key } };
}
