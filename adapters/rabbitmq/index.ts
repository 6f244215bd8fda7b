/**
 * `effectively-once/rabbitmq`: the RabbitMQ source adapter and outbox publisher, over
 * `amqplib`, an optional peer dependency of `effectively-once`.
 * @packageDocumentation
 * @module effectively-once/rabbitmq
 */
export { rabbitmqSource, RabbitmqSource } from './source.js';
export type {
  RabbitmqSourceOptions,
  RabbitmqKey,
  RabbitmqKeyFunction,
  RabbitmqParse,
} from './options.js';
export { RABBITMQ_HEADERS } from './types.js';
export type { AmqpConnectionLike } from './types.js';
export { delayStep } from './republisher.js';
export { rabbitmqPublisher } from './publisher.js';
export type { RabbitmqPublisherOptions, RabbitmqPublisher } from './publisher.js';
