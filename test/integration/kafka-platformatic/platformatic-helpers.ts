/**
 * `@platformatic/kafka` clients for the Kafka integration tests (Node >= 22.22 only:
 * kafka-helpers.ts imports this file on demand, and jest.config.js runs this folder only there).
 */
import { Consumer, Producer } from '@platformatic/kafka';
import type { KafkaConsumerLike, KafkaProducerLike } from '../../../adapters/kafka/index.js';
import { platformaticClients } from '../../../adapters/kafka/platformatic/index.js';
import { kafkaBrokers } from '../../helpers/env.js';

/** Group settings that keep joins and rebalances to about a second on a single broker. */
const FAST_GROUP = {
  sessionTimeout: 6000,
  rebalanceTimeout: 6000,
  heartbeatInterval: 300,
  maxWaitTime: 100,
  retries: 8,
  retryDelay: 100,
} as const;

/** The source's clients over a platformatic consumer of `groupId`, and how to close them. */
export interface PlatformaticTestClients {
  /** The platformatic consumer (a test may close it under the source: a crash). */
  client: Consumer;
  /** What `kafkaSource` takes. */
  clients: { consumer: KafkaConsumerLike; producer: KafkaProducerLike };
  /** Closes both platformatic clients. */
  close(): Promise<void>;
}

export function platformaticTestClients(groupId: string): PlatformaticTestClients {
  const client = new Consumer({
    groupId,
    clientId: 'eo-platformatic-it',
    bootstrapBrokers: kafkaBrokers(),
    autocommit: false,
    ...FAST_GROUP,
  });
  const producer = new Producer({
    clientId: 'eo-platformatic-dlq',
    bootstrapBrokers: kafkaBrokers(),
  });
  return {
    client,
    clients: platformaticClients({ consumer: client, producer }),
    close: async () => {
      await client.close().catch(() => undefined);
      await producer.close().catch(() => undefined);
    },
  };
}
