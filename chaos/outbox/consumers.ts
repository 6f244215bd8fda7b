/**
 * The outbox run's consumer processes, service A on the input and (for the Kafka and
 * SQS publishers) service B on the output: `createConsumer` over `kafkaSource` or
 * `sqsSource`, as an application would use them.
 */
import { chaosReplicaSafe } from '../failover/replica-safe.js';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Kafka, logLevel } from 'kafkajs';
import type pg from 'pg';
import { createConsumer, type Consumer, type Logger, type Source } from 'effectively-once';
import { kafkaSource, type KafkaRecord } from 'effectively-once/kafka';
import { sqsSource } from 'effectively-once/sqs';
import { CHAOS_KAFKA_RETRY, CHAOS_KAFKA_SOURCE } from '../consumer/kafka-source-timings.js';
import type { OutboxNodeConfig } from './shared.js';

/** The process's Kafka client, for its sources and publisher. */
export function chaosKafka(cfg: OutboxNodeConfig, brokers: string[]): Kafka {
  return new Kafka({
    clientId: `chaos-outbox-${cfg.role}-${cfg.index}`,
    brokers,
    logLevel: logLevel.ERROR,
    connectionTimeout: 3000,
    retry: CHAOS_KAFKA_RETRY,
  });
}

/** An SQS client of the run's ElasticMQ. */
export function chaosSqs(endpoint: string): SQSClient {
  return new SQSClient({
    region: 'us-east-1',
    endpoint,
    credentials: { accessKeyId: 'chaos', secretAccessKey: 'chaos' },
  });
}

/** sqsSource settings of both services: a killed process's messages come back within 5 s. */
const SQS_TIMINGS = { visibilityTimeout: 5, heartbeat: true, waitTimeSeconds: 2 };

/** Service A's source: the producer's operations, keyed by their idempotency key. */
export function inputSource<T>(cfg: OutboxNodeConfig): Source<T> {
  const input = cfg.input;
  if (input.kind === 'sqs')
    return sqsSource<T>({
      client: chaosSqs(input.endpoint),
      queueUrl: input.queueUrl,
      key: 'Idempotency-Key',
      deadLetterQueueUrl: input.deadLetterQueueUrl,
      ...SQS_TIMINGS,
    });
  if (input.kind !== 'kafka') throw new Error(`no producer input from ${input.kind}`);
  return kafkaSource<T>({
    kafka: chaosKafka(cfg, input.brokers),
    groupId: input.groupId,
    topics: [input.topic],
    ...CHAOS_KAFKA_SOURCE,
  });
}

/**
 * Service B's source: what the relays published, with no key option (the dedup key is
 * the outbox id: the `eo-outbox-id` header or attribute).
 */
export function outputSource<T>(cfg: OutboxNodeConfig): Source<T> {
  const output = cfg.output;
  if (output.kind === 'sqs')
    return sqsSource<T>({
      client: chaosSqs(output.endpoint),
      queueUrl: output.queueUrl,
      ...SQS_TIMINGS,
    });
  if (output.kind !== 'kafka') throw new Error(`no consumer for a ${output.kind} output`);
  return kafkaSource<T>({
    kafka: chaosKafka(cfg, output.brokers),
    groupId: output.groupId,
    topics: [output.topic],
    ...CHAOS_KAFKA_SOURCE,
    // The offset-key control: a re-published record has a new offset, so a new key.
    ...(cfg.control === 'offset-key'
      ? { key: (r: KafkaRecord) => `${r.topic}/${r.partition}/${r.offset}` }
      : {}),
  });
}

/** A consumer with the run's settings: patient retries, Postgres restarts survived. */
export function chaosConsumer<T>(
  pool: pg.Pool,
  cfg: OutboxNodeConfig,
  name: string,
  source: Source<T>,
  logger: Logger,
  handler: (body: T, tx: pg.PoolClient, key: string) => Promise<void>,
): Consumer {
  return createConsumer<T>({
    name,
    pool,
    schema: cfg.schema,
    source,
    concurrency: 4,
    maxAttempts: 1000,
    lockTimeoutMs: 2000,
    busyRetryDelayMs: 500,
    replicaSafe: chaosReplicaSafe(),
    backoff: { initialMs: 100, maxMs: 1000 },
    handlerTimeoutMs: 30_000,
    logger,
    handler: (body, ctx) => handler(body, ctx.tx, ctx.key),
  });
}
