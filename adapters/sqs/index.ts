/**
 * `effectively-once/sqs`: the Amazon SQS source adapter and the `sqs-consumer` wrapper.
 * `@aws-sdk/client-sqs` is an optional peer dependency of `effectively-once`.
 * @packageDocumentation
 * @module effectively-once/sqs
 */
export { sqsSource, SqsSource } from './source.js';
export type {
  SqsSourceOptions,
  SqsKey,
  SqsKeyFunction,
  BodyParser,
  DeduplicationScope,
} from './options.js';
export { SQS_LIMITS } from './limits.js';
export { sqsPublisher } from './publisher.js';
export type { SqsPublisherOptions } from './publisher.js';
export type { SqsDelivery } from './delivery.js';
export { DEAD_LETTER_ERROR_ATTRIBUTE } from './dead-letter.js';
export { defaultKey } from './keys.js';
export { sqsMessage, isSqsDelivery } from './message.js';
export { withDedup, withDedupBatch } from './with-dedup.js';
export type {
  WithDedupOptions,
  DedupWorker,
  DedupMessageHandler,
  DedupBatchHandler,
} from './with-dedup.js';
