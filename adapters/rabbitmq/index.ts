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
export type { RabbitmqDelivery } from './delivery.js';
export { RABBITMQ_HEADERS } from './types.js';
export type { AmqpConnectionLike } from './types.js';
export { delayStep } from './republisher.js';
