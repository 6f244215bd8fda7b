/**
 * The Kafka integration helpers, with the source over `@platformatic/kafka` clients
 * (Node >= 22.22: jest.config.js runs these files only there).
 */
import { Consumer, Producer } from '@platformatic/kafka';
import { platformaticClients } from '../../../adapters/kafka/index.js';
import { kafkaBrokers } from '../../helpers/env.js';
import { startConsumer, type RunningConsumer } from '../kafka/kafka-helpers.js';

/** Group settings that keep joins and rebalances to about a second on a single broker. */
const FAST_GROUP = {
  sessionTimeout: 6000,
  rebalanceTimeout: 6000,
  heartbeatInterval: 300,
  maxWaitTime: 100,
  retries: 8,
  retryDelay: 100,
} as const;

/** A platformatic consumer of `groupId` as a test builds it (the source's client). */
export function platformaticConsumer(groupId: string): Consumer {
  return new Consumer({
    groupId,
    clientId: 'eo-platformatic-it',
    bootstrapBrokers: kafkaBrokers(),
    autocommit: false,
    ...FAST_GROUP,
  });
}

/** `startConsumer` of the kafkajs helpers, with the source over platformatic clients. */
export async function startPlatformatic(
  options: Parameters<typeof startConsumer>[0] & { client?: Consumer },
): Promise<RunningConsumer & { client: Consumer }> {
  const client = options.client ?? platformaticConsumer(options.groupId);
  const producer = new Producer({
    clientId: 'eo-platformatic-dlq',
    bootstrapBrokers: kafkaBrokers(),
  });
  const running = await startConsumer({
    ...options,
    source: {
      kafka: undefined,
      ...platformaticClients({ consumer: client, producer }),
      ...options.source,
    },
  });
  let stopping: Promise<void> | undefined;
  return {
    ...running,
    client,
    stop: () =>
      (stopping ??= (async () => {
        await running.stop();
        await client.close().catch(() => undefined);
        await producer.close().catch(() => undefined);
      })()),
  };
}
