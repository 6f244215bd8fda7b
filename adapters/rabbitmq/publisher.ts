import type { ConfirmChannel, Message, Options } from 'amqplib';
import { ConfigurationError } from '../../src/errors.js';
import { PublishError } from '../../src/outbox/errors.js';
import { OUTBOX_ID_HEADER, type OutboxRecord, type Publisher } from '../../src/outbox/record.js';
import type { AmqpConnectionLike } from './types.js';

/** Options of {@link rabbitmqPublisher}: give exactly one of `url` and `connection`. */
export interface RabbitmqPublisherOptions {
  /** Where to connect; the publisher owns that connection and closes it on `close()`. */
  url?: string | Options.Connect;
  /** A connection you made and close (amqplib's `connect()` result, recovering or not). */
  connection?: AmqpConnectionLike;
  /** The exchange every row of this destination goes to; `''` is the default exchange. */
  exchange: string;
  /**
   * The routing key: a string (with the default exchange, the queue's name), or a
   * function of the row (e.g. its ordering key for a consistent-hash exchange).
   */
  routingKey: string | ((record: OutboxRecord) => string);
}

/** An outbox `Publisher` over RabbitMQ: close it after the relay stopped. */
export interface RabbitmqPublisher extends Publisher {
  /** Closes the confirm channel, and the connection when the publisher made it from `url`. */
  close(): Promise<void>;
}

/**
 * Publishes to one exchange on a confirm channel (publisher confirms): a row counts as
 * published only once the broker confirmed it, so a broker that lost it (`basic.nack`, a
 * closed channel, a dead connection) fails the row, which the relay retries. Every message
 * is persistent, `mandatory` (a message no queue is bound for comes back and fails its
 * row instead of vanishing), carries the outbox id as its `message-id` (the default dedup
 * key of `rabbitmqSource`) and in header `eo-outbox-id`, the row's headers, its content
 * type, and its creation time as `timestamp` (whole seconds). The rows of one batch go out
 * in order on one channel, which RabbitMQ keeps in order into a queue.
 */
export function rabbitmqPublisher(options: RabbitmqPublisherOptions): RabbitmqPublisher {
  const url = options.url ?? undefined;
  const given = options.connection ?? undefined;
  if ((url === undefined) === (given === undefined))
    throw new ConfigurationError('url', 'give exactly one of `url` and `connection`');
  if (given !== undefined && typeof given.createConfirmChannel !== 'function')
    throw new ConfigurationError('connection', "must be amqplib's connect() result");
  if (typeof options.exchange !== 'string')
    throw new ConfigurationError('exchange', "must be an exchange name ('' for the default)");
  const { exchange, routingKey } = options;
  if (typeof routingKey !== 'function' && (typeof routingKey !== 'string' || routingKey === ''))
    throw new ConfigurationError('routingKey', 'must be a routing key or a function of the row');
  const destination = exchange === '' ? `(default exchange)/${String(routingKey)}` : exchange;
  let connection: Promise<AmqpConnectionLike> | undefined;
  let channel: Promise<ConfirmChannel> | undefined;
  /** Messages the broker returned as unroutable, by message id, until their confirm. */
  const returned = new Set<string>();

  const connect = (): Promise<AmqpConnectionLike> => {
    connection ??= (async () => {
      if (given !== undefined) return given;
      const amqp = await import('amqplib');
      const made = await amqp.connect(url!);
      made.on('error', () => undefined); // surfaced as failed publishes
      return made;
    })();
    connection.catch(() => (connection = undefined));
    return connection;
  };
  const open = (): Promise<ConfirmChannel> => {
    channel ??= (async () => {
      const c = await (await connect()).createConfirmChannel();
      c.on('error', () => undefined); // a closed channel fails its unconfirmed publishes
      c.on('return', (message: Message) => {
        const id = message.properties.messageId as unknown;
        if (typeof id === 'string') returned.add(id);
      });
      c.once('close', () => {
        channel = undefined;
        // An owned plain connection that died is made again on the next batch.
        if (given === undefined) connection = undefined;
      });
      return c;
    })();
    channel.catch(() => (channel = undefined));
    return channel;
  };

  return {
    async publish(records, signal) {
      const c = await open();
      const failures = new Map<string, unknown>();
      const confirms = records.map(
        (record) =>
          new Promise<void>((resolve) => {
            const settle = (err: unknown): void => {
              if (returned.delete(record.id))
                failures.set(
                  record.id,
                  new PublishError(destination, 'unroutable: no queue is bound for it', {
                    details: { id: record.id },
                  }),
                );
              else if (err)
                failures.set(
                  record.id,
                  new PublishError(destination, 'not confirmed by the broker', {
                    cause: err,
                    details: { id: record.id },
                  }),
                );
              resolve();
            };
            try {
              c.publish(exchange, keyOf(record), record.payload, properties(record), settle);
            } catch (error) {
              settle(error);
            }
          }),
      );
      const aborted = new Promise<'aborted'>((resolve) =>
        signal.addEventListener('abort', () => resolve('aborted'), { once: true }),
      );
      if ((await Promise.race([Promise.all(confirms), aborted])) === 'aborted')
        throw new PublishError(destination, 'confirms did not arrive in time', {
          cause: signal.reason,
        });
      return failures;
    },
    async close() {
      const c = channel;
      channel = undefined;
      if (c !== undefined) await c.then((ch) => ch.close()).catch(() => undefined);
      const conn = connection;
      connection = undefined;
      if (given === undefined && conn !== undefined)
        await conn.then((x) => x.close()).catch(() => undefined);
    },
  };

  function keyOf(record: OutboxRecord): string {
    return typeof routingKey === 'function' ? routingKey(record) : routingKey;
  }
}

function properties(record: OutboxRecord): Options.Publish {
  return {
    messageId: record.id,
    contentType: record.contentType,
    timestamp: Math.floor(record.createdAt.getTime() / 1000),
    headers: { ...record.headers, [OUTBOX_ID_HEADER]: record.id },
    persistent: true,
    mandatory: true,
  };
}
