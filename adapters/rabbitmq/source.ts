import type { ConsumeMessage } from 'amqplib';
import { BrokerError, type EffectivelyOnceError } from '../../src/errors.js';
import { retryDelay } from '../../src/backoff.js';
import { silentLogger } from '../../src/logger.js';
import { sleep } from '../../src/sleep.js';
import type { Logger, Source, SourceContext } from '../../src/types.js';
import { decodeMessage, messageKey } from './decode.js';
import { ConsumeChannel, RabbitmqDelivery } from './delivery.js';
import {
  resolveRabbitmqOptions,
  type RabbitmqSourceOptions,
  type ResolvedRabbitmqOptions,
} from './options.js';
import { Republisher } from './republisher.js';
import { attemptOf, type AmqpConnectionLike } from './types.js';

/**
 * Consumes one RabbitMQ queue with manual acknowledgements: `prefetch` unacked messages
 * at most, each handed to the runner at once, acked only once its claim committed (or
 * proved a duplicate). When the channel or connection is lost, the broker puts every
 * unacked message back; the source opens a new channel (with backoff) and consumes
 * again, and the deliveries of the lost channel are settled no more.
 */
export class RabbitmqSource<T> implements Source<T> {
  /** `rabbitmq:` and the queue's name. */
  readonly description: string;
  private readonly options: ResolvedRabbitmqOptions<T>;
  private readonly republisher: Republisher;
  private readonly pending = new Set<Promise<unknown>>();
  private connection: AmqpConnectionLike | undefined;
  private current: ConsumeChannel | undefined;
  private ctx: SourceContext<T> | undefined;
  private running = false;

  constructor(options: RabbitmqSourceOptions<T>) {
    this.options = resolveRabbitmqOptions(options);
    this.description = `rabbitmq:${this.options.queue}`;
    this.republisher = new Republisher(
      () => this.connected(),
      this.options.queue,
      this.options.retryQueuePrefix,
      (error) => this.report(new BrokerError('publish channel', error, { details: this.where() })),
    );
  }

  /** Consumes until `ctx.signal` aborts (see `Source.run`). */
  async run(ctx: SourceContext<T>): Promise<void> {
    if (this.running) throw new Error(`${this.description} is already running`);
    this.running = true;
    this.ctx = ctx;
    try {
      if (this.connection === undefined) this.connection = await this.connect(ctx);
      for (let failures = 0; !ctx.signal.aborted;) {
        const consumed = await this.consumeOnce(ctx).then(
          () => true,
          (error: unknown) => {
            if (!ctx.signal.aborted)
              this.report(new BrokerError('consume', error, { details: this.where() }));
            return false;
          },
        );
        if (ctx.signal.aborted) break;
        failures = consumed ? 1 : failures + 1;
        await sleep(retryDelay(failures, this.options.reconnectBackoff), ctx.signal);
      }
    } finally {
      this.running = false;
    }
  }

  /**
   * Waits for the deliveries handed to the runner to settle (the consumer waited for
   * their COMMITs; their acks went out on the channel), then closes the channels and the
   * connection the source opened (see `Source.close`).
   */
  async close(options: { readonly signal?: AbortSignal } = {}): Promise<void> {
    const settled = Promise.all([...this.pending]);
    if (options.signal === undefined) await settled;
    else
      await Promise.race([
        settled,
        new Promise((resolve) => options.signal!.addEventListener('abort', resolve)),
      ]);
    const channel = this.current;
    this.current = undefined;
    if (channel?.open) await channel.channel.close().catch(() => undefined);
    await this.republisher.close();
    if (this.options.url !== undefined && this.connection !== undefined) {
      const connection = this.connection;
      this.connection = undefined;
      await connection.close().catch(() => undefined);
    }
  }

  /** One channel's life: open, consume, and wait until it closes or the consumer stops. */
  private async consumeOnce(ctx: SourceContext<T>): Promise<void> {
    const channel = await this.connected().createChannel();
    const on = new ConsumeChannel(channel);
    this.current = on;
    const closed = new Promise<void>((resolve) => {
      channel.once('close', () => {
        on.markLost(new Error(`channel on ${this.description} closed`));
        resolve();
      });
    });
    channel.on('error', (error: unknown) =>
      this.report(new BrokerError('channel', error, { details: this.where() })),
    );
    await channel.prefetch(this.options.prefetch);
    const { consumerTag } = await channel.consume(
      this.options.queue,
      (message) => this.onMessage(ctx, on, message),
      { noAck: false },
    );
    const stopped = new Promise<void>((resolve) =>
      ctx.signal.addEventListener('abort', () => resolve(), { once: true }),
    );
    await Promise.race([closed, stopped]);
    if (on.open && ctx.signal.aborted) {
      // Stop receiving; the channel stays open for the acks of what is in flight.
      await channel.cancel(consumerTag).catch(() => undefined);
      return;
    }
    throw new Error('channel closed (connection lost, or closed by the broker)');
  }

  private onMessage(
    ctx: SourceContext<T>,
    on: ConsumeChannel,
    message: ConsumeMessage | null,
  ): void {
    if (message === null) {
      // The broker cancelled the consumer (queue deleted, or a quorum queue's leader moved).
      void on.channel.close().catch(() => undefined);
      return;
    }
    const delivery = this.toDelivery(ctx, on, message);
    if (ctx.signal.aborted) {
      // Arrived between stop and the cancel: straight back to the queue.
      this.track(delivery.release().catch(() => undefined));
      return;
    }
    this.track(ctx.deliver(delivery));
  }

  private toDelivery(
    ctx: SourceContext<T>,
    on: ConsumeChannel,
    message: ConsumeMessage,
  ): RabbitmqDelivery<T> {
    const { queue } = this.options;
    const { key, rejection: keyRejection } = messageKey(message, this.options, queue);
    const decoded = decodeMessage(message, this.options.parse, queue);
    const rejection: EffectivelyOnceError | undefined = decoded.rejection ?? keyRejection;
    return new RabbitmqDelivery<T>(
      message,
      { key, body: decoded.body as T, attempt: attemptOf(message), rejection },
      {
        queue,
        on,
        republisher: this.republisher,
        deadLetterExchange: this.options.deadLetterExchange,
        deadLetterRoutingKey: this.options.deadLetterRoutingKey,
        hardStop: ctx.hardStop,
      },
    );
  }

  private track(promise: Promise<unknown>): void {
    this.pending.add(promise);
    void promise.finally(() => this.pending.delete(promise));
  }

  /**
   * The connection: the one given, or one of amqplib's recovering connections to `url`,
   * which reconnects with backoff by itself (channels opened on it wait for that).
   */
  private async connect(ctx: SourceContext<T>): Promise<AmqpConnectionLike> {
    if (this.options.connection !== undefined) return this.options.connection;
    const amqp = await import('amqplib');
    const { initialMs, maxMs } = this.options.reconnectBackoff;
    const connection = await amqp.connect(this.options.url!, {
      recovery: {
        initialDelay: initialMs,
        maxDelay: maxMs,
        maxRetries: Infinity,
        waitForConnect: false,
      },
    });
    connection.on('error', (error: unknown) =>
      this.report(new BrokerError('connection', error, { details: this.where() })),
    );
    connection.on('disconnect', (error: unknown) =>
      ctx.logger.warn(
        { err: error, queue: this.options.queue },
        'RabbitMQ connection lost; reconnecting',
      ),
    );
    return connection;
  }

  private connected(): AmqpConnectionLike {
    if (this.connection === undefined) throw new Error(`${this.description} is not connected`);
    return this.connection;
  }

  private where(): Record<string, unknown> {
    return { queue: this.options.queue };
  }

  private get logger(): Logger {
    return this.ctx?.logger ?? silentLogger;
  }

  private report(error: EffectivelyOnceError): void {
    if (this.ctx !== undefined) this.ctx.reportError(error);
    else this.logger.error({ err: error }, error.message);
  }
}

/** A RabbitMQ `Source` for `createConsumer`; the queue must exist (see docs/rabbitmq.md). */
export function rabbitmqSource<T = unknown>(options: RabbitmqSourceOptions<T>): RabbitmqSource<T> {
  return new RabbitmqSource(options);
}
