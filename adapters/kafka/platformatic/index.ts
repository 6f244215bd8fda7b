/**
 * `effectively-once/kafka/platformatic`: `@platformatic/kafka` clients in the shape
 * `kafkaSource` and `kafkaPublisher` (from `effectively-once/kafka`) drive. Nothing here
 * imports `@platformatic/kafka`: its `Consumer` and `Producer` fit the structural types
 * below, so the package stays an optional peer dependency (it needs Node 22.22 or later).
 * @packageDocumentation
 * @module effectively-once/kafka/platformatic
 */
import type { KafkaConsumerLike, KafkaProducerLike } from '../client.js';
import { PlatformaticConsumer, type PlatformaticConsumerOptions } from './consumer.js';
import { platformaticProducer } from './producer.js';
import type { PlatformaticConsumerLike, PlatformaticProducerLike } from './types.js';

/** What {@link platformaticClients} takes. */
export interface PlatformaticClientsOptions extends PlatformaticConsumerOptions {
  /**
   * A `@platformatic/kafka` `Consumer` of the source's `groupId`, with the default
   * (Buffer) deserializers, not consuming yet. The source opens its streams; you close
   * it after the source stopped.
   */
  consumer: PlatformaticConsumerLike;
  /** A `@platformatic/kafka` `Producer` (Buffer serializers) for dead letters; you close it. */
  producer: PlatformaticProducerLike;
}

/**
 * Makes `@platformatic/kafka` clients usable by `kafkaSource`: spread the result
 * into its options (`kafkaSource({ ...platformaticClients({ consumer, producer }), groupId, topics })`).
 * The source then behaves as with kafkajs: order per partition, `keyConcurrency`,
 * offsets in Kafka or Postgres, eager rebalances, dead letters.
 */
export function platformaticClients(options: PlatformaticClientsOptions): {
  consumer: KafkaConsumerLike;
  producer: KafkaProducerLike;
} {
  const { consumer, producer, ...rest } = options;
  return {
    consumer: platformaticConsumer(consumer, rest),
    producer: platformaticProducer(producer),
  };
}

/**
 * A `@platformatic/kafka` `Consumer` in the kafkajs `Consumer` shape (what
 * {@link platformaticClients} does for the consumer alone, e.g. inside a `kafka` factory).
 * Its `disconnect()` closes the client.
 */
export function platformaticConsumer(
  consumer: PlatformaticConsumerLike,
  options: PlatformaticConsumerOptions = {},
): KafkaConsumerLike {
  return new PlatformaticConsumer(consumer, options);
}

export { platformaticProducer };
export type { PlatformaticConsumerOptions, PlatformaticFetchOptions } from './consumer.js';
export type {
  PlatformaticAssignment,
  PlatformaticCommitOffset,
  PlatformaticConsumeOptions,
  PlatformaticConsumerLike,
  PlatformaticMessageLike,
  PlatformaticMessageToProduce,
  PlatformaticProducerLike,
  PlatformaticStreamLike,
} from './types.js';
