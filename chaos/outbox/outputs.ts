/**
 * The outbox run's two ends: service A's input (a Kafka topic or an SQS queue, the
 * broker runs' `ChaosBroker`) and the relays' output (a Kafka topic, an SQS FIFO queue,
 * or the ports of service B's HTTP receivers), with what the run asks of them: is
 * everything consumed, and how many copies reached B's side.
 */
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
} from '@aws-sdk/client-sqs';
import { Kafka, logLevel } from 'kafkajs';
import type pg from 'pg';
import { freePorts } from '../../kit/services/ports.js';
import type { ChaosBroker } from '../consumer/broker-api.js';
import { createBroker } from '../consumer/broker.js';
import type { ChaosServices } from '../../kit/services/private.js';
import type { OutboxChaosArgs } from './args.js';
import { chaosSqs } from './consumers.js';
import { outboxTables, type OutputConfig } from './shared.js';

/** The relays' output, as the run sees it. */
export interface ChaosOutput {
  config: OutputConfig;
  /** Nothing published is left for B to consume. */
  drained(): Promise<boolean>;
  /**
   * Copies that reached B's side beyond one per operation (records on the topic,
   * requests to the receiver); undefined for SQS FIFO, which drops a re-sent message
   * itself (its deduplication id is the outbox id).
   */
  copies(): Promise<number | undefined>;
  close(cleanup: boolean): Promise<void>;
}

/** Service A's input: the broker runs' topic or queue. */
export function createInput(
  args: OutboxChaosArgs,
  services: ChaosServices,
  runId: string,
): Promise<ChaosBroker> {
  return createBroker(args, services.brokerEndpoint, `${runId}-a`);
}

export async function createOutput(
  args: OutboxChaosArgs,
  services: ChaosServices,
  runId: string,
  pool: pg.Pool,
  schema: string,
): Promise<ChaosOutput> {
  if (args.publisher === 'kafka') {
    const { createKafkaBroker } = await import('../consumer/kafka-broker.js');
    const brokers = services.brokerEndpoint.split(',');
    const out = await createKafkaBroker(brokers, `${runId}-b`, args.partitions);
    if (out.worker.kind !== 'kafka') throw new Error('a Kafka output');
    const { topic, groupId } = out.worker;
    return {
      config: { kind: 'kafka', brokers, topic, groupId },
      drained: () => out.drained(),
      copies: async () => (await topicRecords(brokers, topic)) - args.operations,
      close: (cleanup) => out.close(cleanup),
    };
  }
  if (args.publisher === 'sqs') {
    const endpoint = services.brokerEndpoint;
    const client = chaosSqs(endpoint);
    const created = await client.send(
      new CreateQueueCommand({
        QueueName: `chaos-${runId}-b.fifo`,
        Attributes: { FifoQueue: 'true', VisibilityTimeout: '5' },
      }),
    );
    const queueUrl = created.QueueUrl;
    if (queueUrl === undefined) throw new Error('CreateQueue returned no URL');
    return {
      config: { kind: 'sqs', endpoint, queueUrl },
      async drained() {
        const out = await client.send(
          new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }),
        );
        const a = out.Attributes ?? {};
        return (
          Number(a.ApproximateNumberOfMessages ?? 0) +
            Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
            Number(a.ApproximateNumberOfMessagesDelayed ?? 0) ===
          0
        );
      },
      copies: async () => undefined,
      async close(cleanup) {
        if (cleanup)
          await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
        client.destroy();
      },
    };
  }
  const ports = await freePorts(args.bWorkers);
  const t = outboxTables(schema);
  return {
    config: { kind: 'http', ports },
    drained: async () => true,
    async copies() {
      const { rows } = await pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${t.bRequests}`,
      );
      return (rows[0]?.n ?? 0) - args.operations;
    },
    close: async () => undefined,
  };
}

/** Records on a topic (its partitions' high - low watermarks). */
async function topicRecords(brokers: string[], topic: string): Promise<number> {
  const admin = new Kafka({
    clientId: 'chaos-outbox-check',
    brokers,
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
  } finally {
    await admin.disconnect();
  }
}
