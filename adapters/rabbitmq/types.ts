import type { Channel, ConfirmChannel, ConsumeMessage } from 'amqplib';

/**
 * What the adapters need of a connection: amqplib's `connect()` result, plain
 * (`ChannelModel`) or recovering (`RecoveringChannelModel`, with the `recovery` option).
 */
export interface AmqpConnectionLike {
  /** Opens a channel (on a recovering connection, once it is connected). */
  createChannel(): Promise<Channel>;
  /** Opens a channel in confirm mode (publisher confirms). */
  createConfirmChannel(): Promise<ConfirmChannel>;
  /** Closes the connection. */
  close(): Promise<void>;
}

/** Headers the source writes on the copies it publishes (retries and dead letters). */
export const RABBITMQ_HEADERS = {
  /** The attempt the copy's next delivery is: retries the source itself counts. */
  attempt: 'eo-attempt',
  /** Dead letters: the queue the message was consumed from. */
  originalQueue: 'eo-original-queue',
  /** Dead letters: the error's `code`. */
  errorCode: 'eo-error-code',
  /** Dead letters: the error's message (at most 4096 characters). */
  error: 'eo-error',
  /** Dead letters: attempts made. */
  attempts: 'eo-attempts',
  /** Dead letters: when (ISO 8601). */
  deadLetteredAt: 'eo-dead-lettered-at',
} as const;

/**
 * Headers the broker writes and a republished copy must not carry over: a copy is a new
 * message, with its own delivery count and dead-letter history.
 */
const BROKER_HEADERS = new Set(['x-delivery-count', 'x-death']);
const BROKER_HEADER_PREFIXES = ['x-first-death-', 'x-last-death-'];

/** The message's headers without the ones the broker owns. */
export function ownHeaders(message: ConsumeMessage): Record<string, unknown> {
  const headers: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(message.properties.headers ?? {})) {
    if (BROKER_HEADERS.has(name) || BROKER_HEADER_PREFIXES.some((p) => name.startsWith(p)))
      continue;
    headers[name] = value;
  }
  return headers;
}

/**
 * The attempt a delivery is: the source's own `eo-attempt` header (1 when absent: the
 * message was never retried through a delay queue) plus the broker's redeliveries of
 * this copy where the broker counts them (`x-delivery-count`, quorum queues). A classic
 * queue counts nothing: its redeliveries after a lost connection are not attempts.
 */
export function attemptOf(message: ConsumeMessage): number {
  const headers = message.properties.headers ?? {};
  const own = Number(headers[RABBITMQ_HEADERS.attempt]);
  const base = Number.isInteger(own) && own > 0 ? own : 1;
  const count = Number(headers['x-delivery-count']);
  return base + (Number.isInteger(count) && count > 0 ? count : 0);
}
