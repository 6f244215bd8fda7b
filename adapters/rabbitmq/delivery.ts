import type { Channel, ConsumeMessage, Options } from 'amqplib';
import { BrokerError, type EffectivelyOnceError } from '../../src/errors.js';
import type { Delivery, MessagingInfo } from '../../src/types.js';
import type { Republisher } from './republisher.js';
import { RABBITMQ_HEADERS, ownHeaders } from './types.js';

const MAX_ERROR_LENGTH = 4096;

/**
 * The consume channel a delivery came on. Its delivery tags mean something on that
 * channel only: once it closed, the broker has put every unacked message back in the
 * queue, and an ack, reject or retry of one of them must not happen (the retry copy
 * would double the message, the ack would hit the next channel's tags).
 */
export class ConsumeChannel {
  private readonly lost = new AbortController();

  constructor(readonly channel: Channel) {}

  /** Aborts once the channel closed: its deliveries are back with the broker. */
  get signal(): AbortSignal {
    return this.lost.signal;
  }

  get open(): boolean {
    return !this.lost.signal.aborted;
  }

  markLost(reason: Error): void {
    this.lost.abort(reason);
  }
}

/** What a delivery needs from its source. */
export interface DeliveryContext {
  readonly queue: string;
  readonly on: ConsumeChannel;
  readonly republisher: Republisher;
  readonly deadLetterExchange: string | undefined;
  readonly deadLetterRoutingKey: string;
  readonly hardStop: AbortSignal;
}

/** The fields of a delivery the source decoded. */
export interface RabbitmqDeliveryFields<T> {
  readonly key: string | undefined;
  readonly body: T;
  readonly attempt: number;
  readonly rejection: EffectivelyOnceError | undefined;
}

/**
 * One RabbitMQ delivery. Settled once: an ack (`basic.ack`), a retry (a confirmed copy in a
 * delay queue, then the ack), a dead letter (a confirmed copy to the dead-letter exchange
 * then the ack, or a reject without requeue) or a release (`basic.nack` with requeue).
 * On a channel that closed meanwhile each is a no-op or a failure: the broker redelivers.
 */
export class RabbitmqDelivery<T> implements Delivery<T> {
  readonly key: string | undefined;
  readonly body: T;
  readonly attempt: number;
  readonly rejection: EffectivelyOnceError | undefined;
  readonly firstSentAt: Date | undefined;
  readonly firstSentBy = 'producer' as const;

  constructor(
    readonly raw: ConsumeMessage,
    fields: RabbitmqDeliveryFields<T>,
    private readonly ctx: DeliveryContext,
  ) {
    this.key = fields.key;
    this.body = fields.body;
    this.attempt = fields.attempt;
    this.rejection = fields.rejection;
    // AMQP's `timestamp` is whole seconds, set by the producer (the outbox publisher sets it).
    const ts = raw.properties.timestamp as unknown;
    this.firstSentAt = typeof ts === 'number' && ts > 0 ? new Date(ts * 1000) : undefined;
  }

  get payload(): Uint8Array {
    return this.raw.content;
  }

  /** Aborts when the channel the message came on closed (the broker has it back). */
  get signal(): AbortSignal {
    return this.ctx.on.signal;
  }

  async ack(): Promise<void> {
    this.settle('ack', (channel) => channel.ack(this.raw));
  }

  async retry(delayMs: number, _reason: EffectivelyOnceError, attemptSpent = true): Promise<void> {
    this.ensureOpen('retry');
    const headers = ownHeaders(this.raw);
    headers[RABBITMQ_HEADERS.attempt] = attemptSpent ? this.attempt + 1 : this.attempt;
    try {
      await this.ctx.republisher.retry(
        this.raw.content,
        this.copyProperties(headers),
        delayMs,
        this.ctx.hardStop,
      );
    } catch (cause) {
      throw new BrokerError('retry', cause, { details: this.where() });
    }
    this.settle('ack after retry', (channel) => channel.ack(this.raw));
  }

  async deadLetter(reason: EffectivelyOnceError): Promise<void> {
    this.ensureOpen('dead letter');
    const exchange = this.ctx.deadLetterExchange;
    if (exchange === undefined) {
      // The queue's own x-dead-letter-exchange takes it (or the broker drops it).
      this.settle('reject', (channel) => channel.nack(this.raw, false, false));
      return;
    }
    const headers = ownHeaders(this.raw);
    headers[RABBITMQ_HEADERS.originalQueue] = this.ctx.queue;
    headers[RABBITMQ_HEADERS.errorCode] = reason.code;
    headers[RABBITMQ_HEADERS.error] =
      reason.message.length > MAX_ERROR_LENGTH
        ? `${reason.message.slice(0, MAX_ERROR_LENGTH)}…`
        : reason.message;
    headers[RABBITMQ_HEADERS.attempts] = this.attempt;
    headers[RABBITMQ_HEADERS.deadLetteredAt] = new Date().toISOString();
    try {
      await this.ctx.republisher.publish(
        exchange,
        this.ctx.deadLetterRoutingKey,
        this.raw.content,
        this.copyProperties(headers),
        this.ctx.hardStop,
      );
    } catch (cause) {
      throw new BrokerError('dead letter', cause, { details: { ...this.where(), exchange } });
    }
    this.settle('ack after dead letter', (channel) => channel.ack(this.raw));
  }

  async release(): Promise<void> {
    // A closed channel already gave it back.
    if (!this.ctx.on.open) return;
    this.settle('release', (channel) => channel.nack(this.raw, false, true));
  }

  messaging(): MessagingInfo {
    const carrier: Record<string, string> = {};
    for (const [name, value] of Object.entries(this.raw.properties.headers ?? {}))
      if (typeof value === 'string') carrier[name] = value;
    return {
      system: 'rabbitmq',
      destination: this.ctx.queue,
      messageId: (this.raw.properties.messageId as string | undefined) ?? undefined,
      carrier,
    };
  }

  /** The original's properties for a copy, with `headers` in place of its own. */
  private copyProperties(headers: Record<string, unknown>): Options.Publish {
    const p = this.raw.properties;
    const props: Options.Publish = { headers };
    if (p.messageId !== undefined) props.messageId = p.messageId as string;
    if (p.contentType !== undefined) props.contentType = p.contentType as string;
    if (p.contentEncoding !== undefined) props.contentEncoding = p.contentEncoding as string;
    if (p.correlationId !== undefined) props.correlationId = p.correlationId as string;
    if (p.timestamp !== undefined) props.timestamp = p.timestamp as number;
    if (p.type !== undefined) props.type = p.type as string;
    if (p.appId !== undefined) props.appId = p.appId as string;
    if (p.priority !== undefined) props.priority = p.priority as number;
    return props;
  }

  private ensureOpen(operation: string): void {
    if (!this.ctx.on.open)
      throw new BrokerError(operation, this.ctx.on.signal.reason, {
        details: { ...this.where(), reason: 'channel closed: the broker redelivers the message' },
      });
  }

  private settle(operation: string, act: (channel: Channel) => void): void {
    this.ensureOpen(operation);
    try {
      act(this.ctx.on.channel);
    } catch (cause) {
      throw new BrokerError(operation, cause, { details: this.where() });
    }
  }

  private where(): Record<string, unknown> {
    return { queue: this.ctx.queue, deliveryTag: this.raw.fields.deliveryTag };
  }
}
