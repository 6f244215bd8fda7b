import type { Message, SQSClient } from '@aws-sdk/client-sqs';
import { BrokerError, type EffectivelyOnceError } from '../../src/errors.js';
import type { Delivery, Logger, MessagingInfo } from '../../src/types.js';
import { isReceiptHandleLost } from './aws-errors.js';
import { sendToDeadLetterQueue } from './dead-letter.js';
import type { DeleteBatcher } from './delete-batcher.js';
import type { Heartbeat } from './heartbeat.js';
import { SQS_LIMITS } from './limits.js';
import { cappedVisibilitySeconds, changeVisibility } from './visibility.js';

/** A delivery whose `raw` record is the SQS `Message` it was built from. */
export interface SqsDelivery<T = unknown> extends Delivery<T> {
  /** The SQS message as received (attributes, `MessageId`, `ReceiptHandle`). */
  readonly raw: Message;
  /** The queue the message was received from. */
  readonly queueUrl: string;
}

/** Where dead letters go when no `deadLetterQueueUrl` is set. */
export type RedriveMode =
  /** The queue has a redrive policy (or we could not tell): visible again at once, so receives reach maxReceiveCount. */
  | 'redrive'
  /** The queue has no redrive policy: park the message invisible for as long as SQS allows. */
  | 'park';

/** Everything one delivery needs from its source. */
export interface DeliveryDeps {
  client: SQSClient;
  queueUrl: string;
  deleter: DeleteBatcher;
  logger: Logger;
  deadLetterQueueUrl: string | undefined;
  redriveMode: () => RedriveMode;
  /** The consumer's hard stop: cancels the settling requests still unanswered then. */
  hardStop: AbortSignal | undefined;
}

/** Fields of a delivery decided when the message is received. */
export interface DeliveryInit<T> {
  message: Message & { ReceiptHandle: string };
  receivedAt: number;
  key: string | undefined;
  body: T;
  attempt: number;
  orderingKey: string | undefined;
  rejection: EffectivelyOnceError | undefined;
}

/**
 * One received SQS message as a {@link Delivery}. The first settling call wins (later
 * ones return its promise); each stops the heartbeat and waits for a beat in flight
 * before touching the visibility, so a late beat cannot undo a retry delay.
 */
export class SqsMessageDelivery<T> implements SqsDelivery<T> {
  readonly key: string | undefined;
  readonly body: T;
  readonly payload: string;
  readonly raw: Message & { ReceiptHandle: string };
  readonly attempt: number;
  readonly orderingKey: string | undefined;
  readonly rejection: EffectivelyOnceError | undefined;
  readonly queueUrl: string;
  private readonly controller = new AbortController();
  private readonly receivedAt: number;
  private heartbeat: Heartbeat | undefined;
  private settlement: Promise<void> | undefined;

  constructor(
    init: DeliveryInit<T>,
    private readonly deps: DeliveryDeps,
  ) {
    this.raw = init.message;
    this.receivedAt = init.receivedAt;
    this.key = init.key;
    this.body = init.body;
    this.payload = init.message.Body ?? '';
    this.attempt = init.attempt;
    this.orderingKey = init.orderingKey;
    this.rejection = init.rejection;
    this.queueUrl = deps.queueUrl;
  }

  /**
   * The message's `SentTimestamp` (set by SQS, kept on redelivery), for the admission
   * floor. Read only when the floor is on.
   */
  get firstSentAt(): Date | undefined {
    return sentTimestampOf(this.raw);
  }

  /** Aborts when the heartbeat finds the message lost (another receive owns it now). */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Describes the message for telemetry: queue name, `MessageId`, string attributes. */
  messaging(): MessagingInfo {
    return sqsMessaging(this.raw, this.queueUrl);
  }

  /** @internal Attaches the heartbeat that keeps this message invisible until settled. */
  attachHeartbeat(heartbeat: Heartbeat): void {
    this.heartbeat = heartbeat;
  }

  /** @internal The message is no longer ours: abort the handler's signal. */
  lose(error: BrokerError): void {
    this.controller.abort(error);
  }

  /** @internal Stops the heartbeat without settling (the runner left the delivery unsettled). */
  async stopHeartbeat(): Promise<void> {
    await this.heartbeat?.stop();
  }

  async ack(): Promise<void> {
    await this.settle(async () => {
      await this.deps.deleter.delete(this.raw.ReceiptHandle, this.raw.MessageId);
    });
  }

  async retry(delayMs: number, _reason: EffectivelyOnceError): Promise<void> {
    await this.settle(async () => {
      const seconds = cappedVisibilitySeconds(Math.max(0, delayMs) / 1000, this.receivedAt);
      await this.visibility('retry', seconds);
    });
  }

  async release(): Promise<void> {
    await this.settle(async () => {
      await this.visibility('release', 0);
    });
  }

  async deadLetter(reason: EffectivelyOnceError): Promise<void> {
    await this.settle(async () => {
      const { deadLetterQueueUrl } = this.deps;
      if (deadLetterQueueUrl !== undefined) {
        try {
          const { skipped } = await sendToDeadLetterQueue(
            this.deps.client,
            deadLetterQueueUrl,
            this.queueUrl,
            this.raw,
            reason,
            this.deps.hardStop,
          );
          if (skipped !== undefined) {
            this.deps.logger.warn(
              {
                queueUrl: this.queueUrl,
                messageId: this.raw.MessageId,
                deadLetterQueueUrl,
                reason: reason.code,
              },
              skipped === 'attribute-limit'
                ? 'dead letter already has 10 message attributes: sent without the error attribute'
                : 'dead letter too close to the size limit: sent without the error attribute',
            );
          }
        } catch (cause) {
          throw this.error('send to dead-letter queue', cause, {
            deadLetterQueueUrl,
            reason: reason.code,
          });
        }
        await this.deps.deleter.delete(this.raw.ReceiptHandle, this.raw.MessageId);
        return;
      }
      if (this.deps.redriveMode() === 'redrive') {
        // Visible again at once: each receive counts towards the redrive policy's
        // maxReceiveCount, after which SQS moves the message to the queue's DLQ.
        await this.visibility('dead-letter (redrive)', 0);
      } else {
        const seconds = cappedVisibilitySeconds(
          SQS_LIMITS.maxVisibilityTimeoutSeconds,
          this.receivedAt,
        );
        this.deps.logger.warn(
          { queueUrl: this.queueUrl, messageId: this.raw.MessageId, seconds, reason: reason.code },
          'queue has no redrive policy and no deadLetterQueueUrl is set: parking the message invisible',
        );
        await this.visibility('dead-letter (park)', seconds);
      }
    });
  }

  private settle(operation: () => Promise<void>): Promise<void> {
    this.settlement ??= (async () => {
      await this.heartbeat?.stop();
      return operation();
    })();
    return this.settlement;
  }

  private async visibility(operation: string, seconds: number): Promise<void> {
    try {
      await changeVisibility(
        this.deps.client,
        this.queueUrl,
        this.raw.ReceiptHandle,
        seconds,
        this.deps.hardStop,
      );
    } catch (cause) {
      throw this.error(`${operation}: change visibility to ${seconds} s`, cause, {
        retryable: !isReceiptHandleLost(cause),
      });
    }
  }

  private error(
    operation: string,
    cause: unknown,
    extra: Record<string, unknown> & { retryable?: boolean } = {},
  ): BrokerError {
    const { retryable, ...details } = extra;
    return new BrokerError(operation, cause, {
      retryable: retryable ?? true,
      details: {
        queueUrl: this.queueUrl,
        messageIds: [this.raw.MessageId],
        key: this.key,
        ...details,
      },
    });
  }
}

/** An SQS message described for telemetry: the queue's name, `MessageId`, string attributes. */
export function sqsMessaging(message: Message, queueUrl: string | undefined): MessagingInfo {
  const carrier: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.MessageAttributes ?? {}))
    if (value.StringValue !== undefined) carrier[name] = value.StringValue;
  // The queue's name is the last path segment of its URL.
  const destination =
    queueUrl === undefined ? 'unknown' : queueUrl.slice(queueUrl.lastIndexOf('/') + 1);
  return { system: 'aws_sqs', destination, messageId: message.MessageId, carrier };
}

/**
 * When SQS says the message was first sent: its `SentTimestamp` system attribute (set by
 * SQS, ms since the epoch), which a redelivery keeps. Undefined when the receive did not
 * ask for it (`MessageSystemAttributeNames`) or it is not a number.
 */
export function sentTimestampOf(message: Message): Date | undefined {
  const text = message.Attributes?.SentTimestamp;
  if (text === undefined) return undefined;
  const ms = Number(text);
  return Number.isSafeInteger(ms) && ms > 0 ? new Date(ms) : undefined;
}
