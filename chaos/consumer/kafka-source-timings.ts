import type { KafkaSourceOptions } from 'effectively-once/kafka';

/** kafkajs retries for chaos clients: patient enough to ride out a broker restart. */
export const CHAOS_KAFKA_RETRY = { initialRetryTime: 200, maxRetryTime: 2000, retries: 30 };

/**
 * The kafkaSource settings every chaos consumer shares (the worker fleet's and the
 * outbox target's). Short sessions: a killed member is noticed, and its partitions
 * reassigned, within seconds.
 */
export const CHAOS_KAFKA_SOURCE = {
  fromBeginning: true,
  consumerConfig: {
    sessionTimeout: 4000,
    rebalanceTimeout: 6000,
    heartbeatInterval: 400,
    maxWaitTimeInMs: 100,
    retry: CHAOS_KAFKA_RETRY,
  },
  producerConfig: { retry: CHAOS_KAFKA_RETRY },
  keyConcurrency: 4,
  commitIntervalMs: 200,
  redeliveryDelayMs: 500,
} satisfies Partial<KafkaSourceOptions>;
