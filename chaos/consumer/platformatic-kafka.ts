/**
 * `--kafka-client platformatic`: a kafkajs-`Kafka`-shaped factory over `@platformatic/kafka`,
 * so the worker (and armKafkaCommits) use it exactly as they use kafkajs. Imported only
 * when chosen: the package needs Node >= 22.22.
 */
import { Consumer, Producer } from '@platformatic/kafka';
import type { KafkaLike } from 'effectively-once/kafka';
import { platformaticConsumer, platformaticProducer } from 'effectively-once/kafka/platformatic';
import { CHAOS_KAFKA_RETRY } from './kafka-source-timings.js';

/** Retries as patient as the kafkajs clients' (a broker restart must be ridden out). */
const RETRY = {
  retries: CHAOS_KAFKA_RETRY.retries,
  retryDelay: CHAOS_KAFKA_RETRY.initialRetryTime,
};

export function platformaticKafka(clientId: string, brokers: string[]): KafkaLike {
  return {
    consumer: (config) =>
      platformaticConsumer(
        new Consumer({
          groupId: config.groupId,
          clientId,
          bootstrapBrokers: brokers,
          autocommit: false,
          ...(config.sessionTimeout === undefined ? {} : { sessionTimeout: config.sessionTimeout }),
          ...(config.rebalanceTimeout === undefined
            ? {}
            : { rebalanceTimeout: config.rebalanceTimeout }),
          ...(config.heartbeatInterval === undefined
            ? {}
            : { heartbeatInterval: config.heartbeatInterval }),
          ...(config.maxWaitTimeInMs === undefined ? {} : { maxWaitTime: config.maxWaitTimeInMs }),
          ...RETRY,
        }),
      ),
    producer: () =>
      platformaticProducer(new Producer({ clientId, bootstrapBrokers: brokers, ...RETRY })),
  };
}
