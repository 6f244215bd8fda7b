/**
 * `effectively-once/kafka`: a Kafka consumer-group source for `createConsumer`, the
 * outbox relay's Kafka publisher, and a wrapper that makes an existing kafkajs
 * `eachMessage` handler exactly-once. Typed over the slice of the kafkajs API they use:
 * a kafkajs client fits as is, a `@platformatic/kafka` one through
 * `effectively-once/kafka/platformatic`. `kafkajs` is an optional peer dependency.
 * @packageDocumentation
 * @module effectively-once/kafka
 */
export { kafkaSource, KafkaSource } from './source.js';
export {
  PartitionRevokedError,
  StoredOffsetAheadError,
  type OffsetMarkMismatch,
} from './errors.js';
export type { KafkaPartitionState } from './source.js';
export type { KafkaSourceOptions } from './options.js';
export { migrateKafkaOffsets } from './postgres-offsets.js';
export { DEFAULT_OFFSETS_TABLE } from '../../src/store/kafka-offsets.js';
export type { KafkaOffsetsTableOptions } from './postgres-offsets.js';
export { isKafkaDelivery, kafkaRecordOf } from './record.js';
export type { KafkaRecord, KafkaTimestampType } from './record.js';
export { DEFAULT_IDEMPOTENCY_HEADER, defaultKafkaKey, headerText } from './keys.js';
export type { KafkaKey, KafkaKeyFunction } from './keys.js';
export type { KafkaParse } from './decode.js';
export { DEAD_LETTER_HEADERS } from './dead-letter.js';
export type {
  EachBatchPayloadLike,
  KafkaBatchLike,
  KafkaConsumerConfig,
  KafkaConsumerLike,
  KafkaCrashEvent,
  KafkaGroupJoinEvent,
  KafkaHeaders,
  KafkaHeaderValue,
  KafkaLike,
  KafkaMessageLike,
  KafkaOutgoingMessage,
  KafkaProducerConfig,
  KafkaProducerLike,
  KafkaRunConfig,
  KafkaTopicPartitionOffset,
  KafkaTopicPartitions,
} from './client.js';
export { kafkaPublisher } from './publisher.js';
export type { KafkaPublisher, KafkaPublisherOptions } from './publisher.js';
export { exactlyOnceEachMessage } from './each-message.js';
export type {
  EachMessagePayloadLike,
  ExactlyOnceEachMessage,
  ExactlyOnceEachMessageHandler,
  ExactlyOnceEachMessageOptions,
} from './each-message.js';
