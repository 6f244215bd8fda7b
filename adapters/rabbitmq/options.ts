import type { ConsumeMessage, Options } from 'amqplib';
import { ConfigurationError } from '../../src/errors.js';
import { intOption } from '../../src/option-checks.js';
import type { AmqpConnectionLike } from './types.js';

/** How a message's body bytes become the message handed to the handler. */
export type RabbitmqParse<T> = 'json' | 'text' | 'buffer' | ((message: ConsumeMessage) => T);

/** Derives the dedup key of a message; `undefined` or `''` gets it dead-lettered. */
export type RabbitmqKeyFunction = (message: ConsumeMessage) => string | undefined;

/**
 * The `key` option of {@link rabbitmqSource}: the name of a header holding the key, or a
 * function of the message. Default: the `message-id` property.
 */
export type RabbitmqKey = string | RabbitmqKeyFunction;

/**
 * Options of {@link rabbitmqSource}: give exactly one of `url` and `connection`.
 */
export interface RabbitmqSourceOptions<T = unknown> {
  /**
   * Where the source connects (`amqp://user:pass@host:5672/vhost`, or amqplib's connect
   * options). The source owns that connection: it reconnects with backoff when it is
   * lost and closes it at stop.
   */
  url?: string | Options.Connect;
  /**
   * A connection you made and close: amqplib's `connect()` result, with or without its
   * `recovery` option. The source opens its channels on it and, when a channel closes,
   * opens new ones (a recovering connection waits for its reconnect).
   */
  connection?: AmqpConnectionLike;
  /** The queue to consume. It must exist; declare it (and its type) yourself. */
  queue: string;
  /**
   * Unacknowledged deliveries the broker hands this consumer at once (`basic.qos`): the
   * concurrency bound of the source. Default 10, 1..65 535.
   */
  prefetch?: number;
  /**
   * Where the dedup key comes from: a header's name (a message without the header has
   * no key and is dead-lettered), or a function of the message. Default: the
   * `message-id` property, which this library's outbox publisher sets to the row id.
   */
  key?: RabbitmqKey;
  /** How the body is decoded: `'json'` (default), `'text'` (UTF-8), `'buffer'` or a function. */
  parse?: RabbitmqParse<T>;
  /**
   * Exchange dead letters are published to (with publisher confirms, then the original is
   * acked), carrying the message's properties and headers plus why (`eo-error-code`,
   * `eo-error`), where from and after how many attempts. Default: none, the message is
   * rejected without requeue and the queue's own `x-dead-letter-exchange` takes it (or
   * the broker drops it when the queue has none).
   */
  deadLetterExchange?: string;
  /** Routing key of dead letters published to `deadLetterExchange`. Default: the queue's name. */
  deadLetterRoutingKey?: string;
  /**
   * Prefix of the delay queues retries wait in (one per delay step, declared on first use,
   * each dead-lettering back to `queue` through the default exchange). Default
   * `<queue>.eo-retry`.
   */
  retryQueuePrefix?: string;
  /** Delay after losing the channel or connection, doubling up to `maxMs`. Default `{ initialMs: 500, maxMs: 30000 }`. */
  reconnectBackoff?: { initialMs?: number; maxMs?: number };
}

/** {@link RabbitmqSourceOptions} with defaults applied, after validation. */
export interface ResolvedRabbitmqOptions<T> {
  url: string | Options.Connect | undefined;
  connection: AmqpConnectionLike | undefined;
  queue: string;
  prefetch: number;
  keyHeader: string | undefined;
  key: RabbitmqKeyFunction | undefined;
  parse: RabbitmqParse<T>;
  deadLetterExchange: string | undefined;
  deadLetterRoutingKey: string;
  retryQueuePrefix: string;
  reconnectBackoff: { initialMs: number; maxMs: number };
}

/** Validates options and applies defaults; throws {@link ConfigurationError}. */
export function resolveRabbitmqOptions<T>(
  options: RabbitmqSourceOptions<T>,
): ResolvedRabbitmqOptions<T> {
  const url = options.url ?? undefined;
  const connection = options.connection ?? undefined;
  if ((url === undefined) === (connection === undefined))
    throw new ConfigurationError(
      'url',
      'give exactly one of `url` and `connection` (an amqplib connection)',
    );
  if (connection !== undefined && typeof connection.createChannel !== 'function')
    throw new ConfigurationError('connection', "must be amqplib's connect() result");
  if (url !== undefined && typeof url !== 'string' && typeof url !== 'object')
    throw new ConfigurationError('url', 'must be an amqp:// URL or amqplib connect options');
  const queue = nonEmpty('queue', options.queue);
  const { keyHeader, key } = keyOption(options.key);
  const parse = options.parse ?? 'json';
  if (!['json', 'text', 'buffer'].includes(parse as string) && typeof parse !== 'function')
    throw new ConfigurationError('parse', "must be 'json', 'text', 'buffer' or a function");
  const deadLetterExchange =
    options.deadLetterExchange === undefined
      ? undefined
      : nonEmpty('deadLetterExchange', options.deadLetterExchange);
  const backoff = options.reconnectBackoff ?? {};
  const initialMs = intOption('reconnectBackoff.initialMs', backoff.initialMs, 500, 0, 600_000);
  const maxMs = intOption('reconnectBackoff.maxMs', backoff.maxMs, 30_000, initialMs, 3_600_000);
  return {
    url,
    connection,
    queue,
    prefetch: intOption('prefetch', options.prefetch, 10, 1, 65_535),
    keyHeader,
    key,
    parse,
    deadLetterExchange,
    deadLetterRoutingKey:
      options.deadLetterRoutingKey === undefined
        ? queue
        : nonEmpty('deadLetterRoutingKey', options.deadLetterRoutingKey),
    retryQueuePrefix:
      options.retryQueuePrefix === undefined
        ? `${queue}.eo-retry`
        : nonEmpty('retryQueuePrefix', options.retryQueuePrefix),
    reconnectBackoff: { initialMs, maxMs },
  };
}

function keyOption(key: unknown): {
  keyHeader: string | undefined;
  key: RabbitmqKeyFunction | undefined;
} {
  if (key === undefined) return { keyHeader: undefined, key: undefined };
  if (typeof key === 'function') return { keyHeader: undefined, key: key as RabbitmqKeyFunction };
  if (typeof key === 'string' && key !== '') return { keyHeader: key, key: undefined };
  throw new ConfigurationError('key', 'must be a header name or a function (message) => string');
}

function nonEmpty(option: string, value: unknown): string {
  if (typeof value !== 'string' || value === '')
    throw new ConfigurationError(option, 'must be a non-empty string');
  return value;
}
