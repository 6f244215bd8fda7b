import type { Consumer, EachBatchPayload, EachMessagePayload, Kafka } from 'kafkajs';
import { kafkaSource } from 'effectively-once/kafka';
import type { RunContext } from '../context.js';
import { insertCharge } from '../effect.js';
import { runEffectivelyOnce, STALL_MS } from '../eo-consumer.js';
import { InboxProgress, runInboxWorkers, storeInInbox } from '../inbox.js';
import { decodeMessage, type BenchMessage } from '../message.js';
import { platformaticKafka } from './platformatic.js';

export interface KafkaTarget {
  kafka: Kafka;
  topic: string;
  groupId: string;
  /** kafkaSource `keyConcurrency` for b and c. */
  keyConcurrency: number;
  /** The client under kafkaSource in b and c (`--kafka-client`). */
  client?: 'kafkajs' | 'platformatic';
  /** Bootstrap brokers (comma-separated), for a platformatic client. */
  brokers?: string;
}

export type KafkaScenario = 'a' | 'b' | 'c' | 'd' | 'f';
type Runner = (ctx: RunContext, target: KafkaTarget) => Promise<void>;

/** Runs a plain kafkajs consumer (`concurrency` partitions at once, auto-commit) until the drain finished. */
async function runKafkajs(
  ctx: RunContext,
  { kafka, topic, groupId }: KafkaTarget,
  handlers:
    | { eachMessage: (payload: EachMessagePayload) => Promise<void> }
    | { eachBatch: (payload: EachBatchPayload) => Promise<void> },
): Promise<void> {
  const consumer: Consumer = kafka.consumer({ groupId });
  consumer.on(consumer.events.CRASH, ({ payload }) => ctx.drain.fail(payload.error));
  startClockOnJoin(ctx, consumer);
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ partitionsConsumedConcurrently: ctx.concurrency, ...handlers });
    await ctx.drain.wait(STALL_MS);
  } finally {
    await consumer.disconnect();
  }
}

/**
 * Kafka's clock starts when the group is joined, not at the first message: a pre-filled
 * topic arrives in one fetch, and starting at its first record would leave the fetch
 * out (the broker ceiling would read a million msg/s).
 */
function startClockOnJoin(ctx: RunContext, consumer: Consumer): void {
  consumer.on(consumer.events.GROUP_JOIN, () => ctx.drain.start());
}

/**
 * The at-least-once handler people write with kafkajs: do the work and return; kafkajs
 * resolves the offset and auto-commits. `onReturn` runs when the handler returned.
 */
function eachMessage(
  ctx: RunContext,
  work: (message: BenchMessage, body: string) => Promise<void>,
  onReturn: (id: number) => void,
) {
  return {
    eachMessage: async ({ message }: EachMessagePayload): Promise<void> => {
      ctx.drain.start();
      const body = message.value?.toString() ?? '';
      const decoded = decodeMessage(body);
      await work(decoded, body);
      onReturn(decoded.id);
    },
  };
}

/** Scenario d: each fetched batch is resolved and committed at once, no database. */
function brokerCeiling(ctx: RunContext) {
  return {
    eachBatch: async (payload: EachBatchPayload): Promise<void> => {
      const { batch } = payload;
      if (batch.messages.length === 0) return;
      ctx.drain.start();
      const last = batch.messages[batch.messages.length - 1]!;
      payload.resolveOffset(last.offset);
      await payload.commitOffsetsIfNecessary();
      const now = Date.now();
      for (const message of batch.messages) {
        const body = decodeMessage(message.value);
        ctx.drain.done(body.id, now - body.sentAt);
      }
    },
  };
}

const source = async (
  ctx: RunContext,
  { kafka, topic, groupId, keyConcurrency, client, brokers }: KafkaTarget,
  pipeline = 1,
) =>
  kafkaSource<BenchMessage>({
    // The adapter creates (and owns) the consumer; the bench only listens to its group join.
    kafka:
      client === 'platformatic'
        ? await platformaticKafka(ctx, brokers ?? '')
        : {
            consumer: (config) => {
              const consumer = kafka.consumer(config);
              startClockOnJoin(ctx, consumer);
              return consumer;
            },
            producer: (config) => kafka.producer(config),
          },
    groupId,
    topics: [topic],
    fromBeginning: true,
    keyConcurrency,
    pipeline,
    parse: (record) => decodeMessage(record.value),
  });

export const kafkaScenarios: Record<KafkaScenario, Runner> = {
  a: (ctx, target) =>
    runKafkajs(
      ctx,
      target,
      eachMessage(
        ctx,
        (message) => insertCharge(ctx.pool, message),
        (id) => ctx.drain.done(id),
      ),
    ),
  b: async (ctx, target) => runEffectivelyOnce(ctx, await source(ctx, target), 'per-message'),
  // Batch mode hands the runner up to a batch of a partition's records at once.
  c: async (ctx, target) =>
    runEffectivelyOnce(ctx, await source(ctx, target, ctx.batchSize), 'batch'),
  d: (ctx, target) => runKafkajs(ctx, target, brokerCeiling(ctx)),
  f: async (ctx, target) => {
    const progress = new InboxProgress(ctx);
    const workers = runInboxWorkers(ctx, progress);
    workers.catch((error: unknown) => ctx.drain.fail(error));
    await runKafkajs(
      ctx,
      target,
      eachMessage(
        ctx,
        (message, body) => storeInInbox(ctx.pool, message, body),
        (id) => progress.acked(id),
      ),
    );
    await workers;
  },
};
