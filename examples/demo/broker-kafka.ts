import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import { kafkaSource } from 'effectively-once/kafka';
import type { BrokerEnv, DemoBroker } from './broker.js';
import type { Charge } from './payments.js';

const PARTITIONS = 4;

function kafkaClient(brokers: string, clientId: string): Kafka {
  return new Kafka({ clientId, brokers: brokers.split(','), logLevel: logLevel.NOTHING });
}

/**
 * Creates `eo-demo-<random>` (4 partitions) and its dead-letter topic. Records are
 * keyed by account, so each account's charges stay in order within a partition; the
 * idempotency key travels in the `idempotency-key` header.
 */
export async function startKafkaBroker(brokers: string): Promise<DemoBroker> {
  const kafka = kafkaClient(brokers, 'eo-demo-admin');
  const admin = kafka.admin();
  const producer = kafka.producer();
  await Promise.all([admin.connect(), producer.connect()]);
  const topic = `eo-demo-${randomBytes(4).toString('hex')}`;
  const groupId = `${topic}-payments`;
  await admin.createTopics({
    topics: [{ topic, numPartitions: PARTITIONS }, { topic: `${topic}.dlq` }],
    waitForLeaders: true,
  });
  return {
    description: `Kafka at ${brokers}`,
    env: {
      DEMO_BROKER: 'kafka',
      DEMO_KAFKA_BROKERS: brokers,
      DEMO_TOPIC: topic,
      DEMO_GROUP: groupId,
    },
    faults: () =>
      'rebalances as workers join and die replay records finished but not yet committed',
    send: async (charges: Charge[]) => {
      await producer.send({
        topic,
        messages: charges.map((charge) => ({
          key: charge.account,
          value: JSON.stringify(charge),
          headers: { 'idempotency-key': charge.chargeId },
        })),
      });
    },
    backlog: async () => {
      const [ends, committed, dead] = await Promise.all([
        admin.fetchTopicOffsets(topic),
        admin.fetchOffsets({ groupId, topics: [topic] }),
        admin.fetchTopicOffsets(`${topic}.dlq`),
      ]);
      const done = new Map(
        committed[0]?.partitions.map((p) => [p.partition, Number(p.offset)]) ?? [],
      );
      const lag = ends.reduce(
        (sum, end) =>
          sum + Number(end.high) - Math.max(Number(end.low), done.get(end.partition) ?? 0),
        0,
      );
      const deadLetters = dead.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
      return { pending: lag, deadLetters };
    },
    close: async () => {
      await admin.deleteGroups([groupId]).catch(() => undefined);
      await admin.deleteTopics({ topics: [topic, `${topic}.dlq`] }).catch(() => undefined);
      await Promise.allSettled([admin.disconnect(), producer.disconnect()]);
    },
  };
}

/**
 * The payment workers' Kafka source: one member of the consumer group. A short
 * session timeout so a killed member's partitions move on within seconds.
 */
export function kafkaWorkerSource(env: BrokerEnv, worker: string) {
  const source = kafkaSource<Charge>({
    kafka: kafkaClient(env['DEMO_KAFKA_BROKERS'] ?? '', worker),
    groupId: env['DEMO_GROUP'] ?? '',
    topics: [env['DEMO_TOPIC'] ?? ''],
    fromBeginning: true,
    keyConcurrency: 4,
    consumerConfig: { sessionTimeout: 6_000, heartbeatInterval: 500 },
  });
  return { source, close: () => undefined };
}
