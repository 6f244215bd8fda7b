import { randomBytes } from 'node:crypto';
import { Kafka, logLevel, type IHeaders, type KafkaMessage, type Message } from 'kafkajs';
import {
  kafkaSource,
  type KafkaConsumerConfig,
  type KafkaSource,
  type KafkaSourceOptions,
} from '../../../adapters/kafka/index.js';
import {
  createConsumer,
  type Consumer,
  type ConsumerOptions,
  type HandlerContext,
} from '../../../src/index.js';
import { afterAll, beforeAll } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { kafkaBrokers } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';

/** Group settings that keep joins and rebalances to about a second on a single broker. */
export const FAST_GROUP: KafkaConsumerConfig = {
  sessionTimeout: 6000,
  rebalanceTimeout: 6000,
  heartbeatInterval: 300,
  maxWaitTimeInMs: 100,
  retry: { initialRetryTime: 100, retries: 8 },
};

export function testKafka(clientId = 'eo-kafka-it'): Kafka {
  return new Kafka({
    clientId,
    brokers: kafkaBrokers(),
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 100, retries: 8 },
  });
}

/** A topic/group name unique to this test run. */
export function unique(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export async function createTopics(
  kafka: Kafka,
  topics: Array<{ topic: string; partitions: number }>,
): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: topics.map(({ topic, partitions }) => ({ topic, numPartitions: partitions })),
      waitForLeaders: true,
    });
  } finally {
    await admin.disconnect();
  }
}

/**
 * Deletes `topic` and creates it again, empty, with `partitions` partitions: what an
 * operator does to "reset" a topic. Its offsets start at 0 again.
 */
export async function recreateTopic(kafka: Kafka, topic: string, partitions = 1): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: [topic], timeout: 15_000 });
    await waitFor(async () => !(await admin.listTopics()).includes(topic), {
      timeoutMs: 30_000,
      what: 'topic deleted',
    });
    await waitFor(
      async () => {
        try {
          return await admin.createTopics({
            topics: [{ topic, numPartitions: partitions }],
            waitForLeaders: true,
          });
        } catch {
          return false; // deletion still in progress
        }
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'topic recreated' },
    );
  } finally {
    await admin.disconnect();
  }
}

export async function produce(kafka: Kafka, topic: string, messages: Message[]): Promise<void> {
  const producer = kafka.producer();
  await producer.connect();
  try {
    await producer.send({ topic, messages, acks: -1 });
  } finally {
    await producer.disconnect();
  }
}

/** The group's committed next offset per partition (-1 when none). */
export async function committedOffsets(
  kafka: Kafka,
  groupId: string,
  topic: string,
): Promise<Map<number, number>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const [result] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return new Map((result?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  } finally {
    await admin.disconnect();
  }
}

/** What an operator does to replay a topic: the (empty) group's offsets back to the start. */
export async function resetToEarliest(kafka: Kafka, groupId: string, topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.resetOffsets({ groupId, topic, earliest: true });
  } finally {
    await admin.disconnect();
  }
}

/** Reads `count` records of `topic` from the beginning (with a throwaway group). */
export async function readTopic(
  kafka: Kafka,
  topic: string,
  count: number,
): Promise<KafkaMessage[]> {
  const consumer = kafka.consumer({ groupId: unique('reader'), ...FAST_GROUP });
  const seen: KafkaMessage[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void seen.push(message) });
    await waitFor(() => seen.length >= count, {
      timeoutMs: 30_000,
      what: `${count} records on ${topic}`,
    });
    return seen;
  } finally {
    await consumer.disconnect();
  }
}

export function header(headers: IHeaders | undefined, name: string): string | undefined {
  const value = headers?.[name];
  if (value === undefined) return undefined;
  return (Array.isArray(value) ? value[value.length - 1] : value)?.toString();
}

/** One applied effect: a row the handler inserted through ctx.tx. */
export interface EffectRow {
  id: number;
  key: string;
  member: string;
  topic: string;
  part: number;
  kafka_offset: number;
  seq: number | null;
  started_ms: number;
  finished_ms: number;
}

/** The effects table. Deliberately without a unique constraint: a double effect must be visible. */
export async function createEffects(db: TestDatabase): Promise<void> {
  await db.pool.query(`
    CREATE TABLE effects (
      id           bigserial PRIMARY KEY,
      key          text NOT NULL,
      member       text NOT NULL,
      topic        text NOT NULL,
      part         int NOT NULL,
      kafka_offset bigint NOT NULL,
      seq          int,
      started_ms   double precision NOT NULL,
      finished_ms  double precision NOT NULL
    )`);
}

export async function effects(db: TestDatabase): Promise<EffectRow[]> {
  const { rows } = await db.pool.query<EffectRow>(
    `SELECT id::int AS id, key, member, topic, part, kafka_offset::int AS kafka_offset, seq, started_ms, finished_ms
       FROM effects ORDER BY id`,
  );
  return rows;
}

export async function effectCount(db: TestDatabase): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM effects');
  return rows[0]?.n ?? 0;
}

/** Keys whose effect was applied more than once (must stay empty). */
export async function doubleEffects(db: TestDatabase): Promise<Array<{ key: string; n: number }>> {
  const { rows } = await db.pool.query<{ key: string; n: number }>(
    'SELECT key, count(*)::int AS n FROM effects GROUP BY key HAVING count(*) > 1',
  );
  return rows;
}

/** Message body used by these tests. */
export interface Body {
  seq?: number;
  fail?: boolean;
}

/** Inserts the effect row for one record through the claim's transaction. */
export async function applyEffect(
  member: string,
  body: Body,
  ctx: HandlerContext<Body>,
  startedMs: number,
): Promise<void> {
  const record = ctx.delivery.raw as { topic: string; partition: number; offset: string };
  await ctx.tx.query(
    `INSERT INTO effects (key, member, topic, part, kafka_offset, seq, started_ms, finished_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      ctx.key,
      member,
      record.topic,
      record.partition,
      record.offset,
      body?.seq ?? null,
      startedMs,
      performance.timeOrigin + performance.now(),
    ],
  );
}

/**
 * The client `startConsumer` gives the source unless a test passes its own consumer:
 * kafkajs, or `@platformatic/kafka` with EO_KAFKA_CLIENT=platformatic (Node >= 22.22),
 * so the same tests check both.
 */
export type KafkaTestClient = 'kafkajs' | 'platformatic';

function defaultTestClient(): KafkaTestClient {
  return process.env['EO_KAFKA_CLIENT'] === 'platformatic' ? 'platformatic' : 'kafkajs';
}

/** A running effectively-once consumer over a kafkaSource. */
export interface RunningConsumer {
  consumer: Consumer;
  /** The platformatic consumer under the source, when it runs over one. */
  platformatic?: import('@platformatic/kafka').Consumer;
  source: KafkaSource<Body>;
  /** Handler invocations (each attempt), in order. */
  calls: Array<{ key: string; attempt: number; offset: string; partition: number }>;
  stop(): Promise<void>;
}

/**
 * Starts `createConsumer` + `kafkaSource` whose handler inserts one effect row per
 * record. `before` runs inside the transaction first (to slow down, fail, or block).
 */
export async function startConsumer(options: {
  db: TestDatabase;
  kafka: Kafka;
  groupId: string;
  topics: string[];
  member: string;
  name?: string;
  /** Default: EO_KAFKA_CLIENT, else kafkajs. Ignored when `source.consumer` is given. */
  client?: KafkaTestClient;
  source?: Partial<KafkaSourceOptions<Body>>;
  consumer?: Partial<ConsumerOptions<Body>>;
  before?: (body: Body, ctx: HandlerContext<Body>) => Promise<void>;
}): Promise<RunningConsumer> {
  const calls: RunningConsumer['calls'] = [];
  const platformatic =
    (options.client ?? defaultTestClient()) === 'platformatic' &&
    options.source?.consumer === undefined
      ? (await import('../kafka-platformatic/platformatic-helpers.js')).platformaticTestClients(
          options.groupId,
        )
      : undefined;
  const source = kafkaSource<Body>({
    kafka: options.kafka,
    groupId: options.groupId,
    topics: options.topics,
    fromBeginning: true,
    consumerConfig: FAST_GROUP,
    commitIntervalMs: 100,
    ...options.source,
    ...(platformatic === undefined ? {} : { kafka: undefined, ...platformatic.clients }),
  });
  const consumer = createConsumer<Body>({
    name: options.name ?? 'kafka-it',
    source,
    pool: options.db.pool,
    schema: options.db.schema,
    backoff: { initialMs: 20, maxMs: 100 },
    busyRetryDelayMs: 50,
    lockTimeoutMs: 2000,
    ...options.consumer,
    handler: async (body, ctx) => {
      const started = performance.timeOrigin + performance.now();
      const record = ctx.delivery.raw as { partition: number; offset: string };
      calls.push({
        key: ctx.key,
        attempt: ctx.attempt,
        offset: record.offset,
        partition: record.partition,
      });
      ctx.signal.throwIfAborted();
      await options.before?.(body, ctx);
      await applyEffect(options.member, body, ctx, started);
    },
  });
  await consumer.start();
  let stopping: Promise<void> | undefined;
  return {
    consumer,
    source,
    calls,
    ...(platformatic === undefined ? {} : { platformatic: platformatic.client }),
    stop: () =>
      (stopping ??= (async () => {
        await consumer.stop({ timeoutMs: 10_000 });
        await platformatic?.close();
      })()),
  };
}

/** Waits until the consumer has partitions assigned. */
export async function assigned(running: RunningConsumer, count = 1): Promise<void> {
  await waitFor(() => running.source.partitions().length >= count, {
    timeoutMs: 30_000,
    what: 'a partition assignment',
  });
}

/** What each Kafka test file works with: its own schema (with the effects table) and a client. */
export interface KafkaTestEnv {
  db: TestDatabase;
  kafka: Kafka;
}

/**
 * Registers the file's beforeAll / afterAll: a fresh schema holding the effects table and
 * a Kafka client, handed to `use` (which keeps them in the file's variables); the schema
 * is dropped after the file.
 */
export function kafkaTestEnv(prefix: string, use: (env: KafkaTestEnv) => void): void {
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    const fresh = await createTestDatabase(prefix);
    db = fresh;
    await createEffects(fresh);
    use({ db: fresh, kafka: testKafka() });
  }, 30_000);
  afterAll(async () => {
    await db?.close();
  });
}
