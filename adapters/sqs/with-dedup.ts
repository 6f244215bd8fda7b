import { refuseRenamed } from '../../src/option-checks.js';
import { GetQueueAttributesCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import { createConsumer } from '../../src/consumer/consumer.js';
import type { Consumer, StopOptions } from '../../src/consumer/types.js';
import {
  BrokerError,
  ConfigurationError,
  ShutdownError,
  type EffectivelyOnceError,
} from '../../src/errors.js';
import type { ConsumerOptions } from '../../src/consumer/options.js';
import type {
  BatchContext,
  Delivery,
  DeliveryOutcome,
  HandlerContext,
  MessagingInfo,
} from '../../src/types.js';
import { sentTimestampOf, sqsMessaging } from './delivery.js';
import { sendToDeadLetterQueue } from './dead-letter.js';
import { isAccessDenied } from './aws-errors.js';
import { groupScoped, messageKey } from './keys.js';
import {
  deduplicationScopeOption,
  isFifoQueueUrl,
  sqsKeyOption,
  type DeduplicationScope,
  type SqsKey,
} from './options.js';
import { PushSource } from '../../src/consumer/push-source.js';
import { cappedVisibilitySeconds, changeVisibility } from './visibility.js';

/** Options of {@link withDedup} and {@link withDedupBatch}: `createConsumer`'s, minus the source and handler. */
export interface WithDedupOptions extends Omit<
  ConsumerOptions<Message>,
  'source' | 'handler' | 'batchHandler' | 'key'
> {
  /**
   * Client used for retry delays (`ChangeMessageVisibility`) and `deadLetterQueueUrl`.
   * Default: none; a failed message then comes back after the visibility timeout
   * sqs-consumer received it with (or its own `terminateVisibilityTimeout`).
   */
  client?: SQSClient;
  /** URL of the queue sqs-consumer polls; required with `client`. Default: none. */
  queueUrl?: string;
  /**
   * Where the dedup key comes from, as `sqsSource`'s `key`: the name of a String message
   * attribute holding it, e.g. `'Idempotency-Key'` (list it in sqs-consumer's
   * `messageAttributeNames`), or a function of the message (`undefined`: no key,
   * dead-lettered). Default, as `sqsSource`'s: the `eo-outbox-id` attribute of a message
   * an outbox relay sent (list it in `messageAttributeNames`), else
   * `MessageDeduplicationId` when present (FIFO, with
   * `messageSystemAttributeNames: ['All']`), else `MessageId`.
   */
  key?: SqsKey;
  /**
   * Queue to move dead letters to (then sqs-consumer deletes the original). Requires
   * `client`. Default: none; the message is left on the queue for its redrive policy.
   */
  deadLetterQueueUrl?: string;
  /**
   * FIFO queues: where the queue deduplicates `MessageDeduplicationId`s (see
   * `sqsSource`'s option of the same name). With `'messageGroup'` the default key is
   * the group id, a space and the dedup id (`g1 order-7`). Default: read from the queue at
   * `start()` when `client` and a FIFO `queueUrl` are given, else `'queue'`.
   */
  deduplicationScope?: DeduplicationScope;
}

/** sqs-consumer `handleMessage` / `handleMessageBatch` backed by an exactly-once consumer. */
export interface DedupWorker {
  /**
   * For sqs-consumer's `handleMessage`: resolves with the message (sqs-consumer deletes
   * it) once its effect committed or it proved a duplicate; throws when it must stay
   * on the queue (the handler failed, the claim was busy, the consumer is stopping).
   */
  readonly handleMessage: (message: Message) => Promise<Message | undefined>;
  /**
   * For sqs-consumer's `handleMessageBatch`: runs every message and resolves with the
   * ones to delete. It never throws, since sqs-consumer would then keep the whole batch.
   */
  readonly handleMessageBatch: (messages: Message[]) => Promise<Message[]>;
  /** The consumer behind the handlers: events (`processed`, `duplicate`, `error`...) and `stats()`. */
  readonly consumer: Consumer;
  /** Migrates the dedup table and starts the consumer. Called by the first message if you do not. */
  start(): Promise<void>;
  /** Stops the consumer; call it after sqs-consumer's `stop()`. */
  stop(options?: StopOptions): Promise<void>;
}

/** An existing sqs-consumer message handler, now also given the transaction to write through. */
export type DedupMessageHandler = (
  message: Message,
  ctx: HandlerContext<Message>,
) => Promise<unknown>;

/** An existing sqs-consumer batch handler, given only the messages not processed before. */
export type DedupBatchHandler = (messages: Message[], ctx: BatchContext) => Promise<unknown>;

/**
 * Turns an sqs-consumer handler into an exactly-once one. The handler receives the SQS
 * `Message` as before plus a context whose `tx` is the transaction holding the
 * message's claim: effects written through `ctx.tx` happen once per key, however often
 * SQS delivers the message. Its return value is ignored.
 *
 * ```ts
 * const worker = withDedup(async (message, { tx }) => {
 *   await tx.query('INSERT INTO orders ...', [JSON.parse(message.Body!)]);
 * }, { name: 'orders', pool, key: 'Idempotency-Key' });
 * Consumer.create({ queueUrl, sqs, handleMessage: worker.handleMessage,
 *   messageAttributeNames: ['Idempotency-Key'], messageSystemAttributeNames: ['All'] });
 * ```
 */
export function withDedup(handler: DedupMessageHandler, options: WithDedupOptions): DedupWorker {
  refuseRenamed(options ?? {}, { keyAttribute: "use key: '<attribute name>'" });
  if (typeof handler !== 'function')
    throw new ConfigurationError('handler', 'must be a function (message, ctx) => Promise');
  return new Worker(options, {
    handler: async (message, ctx) => {
      await handler(message, ctx);
    },
  });
}

/**
 * Like {@link withDedup} for `handleMessageBatch`, in the consumer's batch mode: the
 * messages sqs-consumer received together are claimed in one transaction and the
 * handler gets only those not processed before (it is not called when none is new).
 */
export function withDedupBatch(handler: DedupBatchHandler, options: WithDedupOptions): DedupWorker {
  refuseRenamed(options ?? {}, { keyAttribute: "use key: '<attribute name>'" });
  if (typeof handler !== 'function')
    throw new ConfigurationError('handler', 'must be a function (messages, ctx) => Promise');
  return new Worker(options, {
    batchHandler: async (items, ctx) => {
      await handler(
        items.map((item) => item.message),
        ctx,
      );
    },
    batch: { maxSize: options.batch?.maxSize ?? 10, maxWaitMs: options.batch?.maxWaitMs ?? 5 },
  });
}

class Worker implements DedupWorker {
  readonly consumer: Consumer;
  private readonly source: PushSource<Message>;
  private startPromise: Promise<void> | undefined;
  private groupScoped: boolean;

  constructor(
    private readonly options: WithDedupOptions,
    mode: Pick<ConsumerOptions<Message>, 'handler' | 'batchHandler' | 'batch'>,
  ) {
    const { client, queueUrl, deadLetterQueueUrl } = options;
    if (client !== undefined && queueUrl === undefined)
      throw new ConfigurationError('queueUrl', 'is required with "client"');
    if (deadLetterQueueUrl !== undefined && client === undefined) {
      throw new ConfigurationError('deadLetterQueueUrl', 'requires "client" to send to it');
    }
    sqsKeyOption(options.key);
    this.groupScoped = deduplicationScopeOption(options.deduplicationScope) === 'messageGroup';
    this.source = new PushSource<Message>(`sqs-consumer:${queueUrl ?? 'queue'}`);
    const {
      client: _c,
      queueUrl: _q,
      deadLetterQueueUrl: _d,
      key: _k,
      deduplicationScope: _s,
      ...consumerOptions
    } = options;
    this.consumer = createConsumer<Message>({ ...consumerOptions, ...mode, source: this.source });
  }

  readonly handleMessage = async (message: Message): Promise<Message | undefined> => {
    const { delivery, outcome } = await this.run(message);
    if (this.deletable(outcome, delivery)) return message;
    throw delivery.failure(outcome);
  };

  readonly handleMessageBatch = async (messages: Message[]): Promise<Message[]> => {
    const results = await Promise.all(
      messages.map((message) => this.run(message).catch(() => undefined)),
    );
    return messages.filter((_, i) => {
      const result = results[i];
      return result !== undefined && this.deletable(result.outcome, result.delivery);
    });
  };

  start(): Promise<void> {
    // A failed start (Postgres down during migrate) is not kept: the next message tries again.
    this.startPromise ??= this.begin().catch((error: unknown) => {
      this.startPromise = undefined;
      throw error;
    });
    return this.startPromise;
  }

  private async begin(): Promise<void> {
    const { client, queueUrl, deduplicationScope } = this.options;
    if (client !== undefined && queueUrl !== undefined && isFifoQueueUrl(queueUrl)) {
      const attributes = await readQueueAttributes(client, queueUrl);
      if (attributes !== undefined)
        this.groupScoped = groupScoped(attributes, { queueUrl, deduplicationScope });
    }
    await this.consumer.start();
  }

  stop(options?: StopOptions): Promise<void> {
    return this.consumer.stop(options);
  }

  private async run(
    message: Message,
  ): Promise<{ delivery: PushedDelivery; outcome: DeliveryOutcome }> {
    await this.start();
    const delivery = new PushedDelivery(
      message,
      this.options,
      this.groupScoped,
      this.source.hardStop,
    );
    return { delivery, outcome: await this.source.push(delivery) };
  }

  private deletable(outcome: DeliveryOutcome, delivery: PushedDelivery): boolean {
    if (outcome === 'processed' || outcome === 'duplicate') return true;
    return outcome === 'dead-lettered' && delivery.movedToDeadLetterQueue;
  }
}

/** A message sqs-consumer owns: settling records the decision; sqs-consumer deletes it or not. */
class PushedDelivery implements Delivery<Message> {
  readonly key: string | undefined;
  readonly body: Message;
  readonly payload: string;
  readonly attempt: number;
  readonly orderingKey: string | undefined;
  readonly rejection: EffectivelyOnceError | undefined;
  movedToDeadLetterQueue = false;
  private reason: EffectivelyOnceError | undefined;
  private readonly receivedAt = Date.now();

  constructor(
    readonly raw: Message,
    private readonly options: WithDedupOptions,
    groupScoped: boolean,
    /** The consumer's hard stop: cancels a visibility change or dead letter unanswered then. */
    private readonly hardStop: AbortSignal | undefined,
  ) {
    // The key sqsSource derives, so a worker can move between the two without re-applying
    // what is in flight: `eo-outbox-id` first (a relayed row sent twice is one message),
    // then the FIFO dedup id (absent on a standard queue: MessageId).
    const { key, rejection } = messageKey(raw, {
      fifo: true,
      groupScoped,
      ...(options.key !== undefined
        ? sqsKeyOption(options.key)
        : { keyAttribute: undefined, key: undefined }),
    });
    this.key = key;
    this.rejection = rejection;
    this.body = raw;
    this.payload = raw.Body ?? '';
    const count = Number(raw.Attributes?.ApproximateReceiveCount);
    this.attempt = Number.isInteger(count) && count > 0 ? count : 1;
    this.orderingKey = raw.Attributes?.MessageGroupId;
  }

  /** `SentTimestamp`, for the admission floor (when sqs-consumer asked for it). */
  get firstSentAt(): Date | undefined {
    return sentTimestampOf(this.raw);
  }

  async ack(): Promise<void> {}

  messaging(): MessagingInfo {
    return sqsMessaging(this.raw, this.options.queueUrl);
  }

  async retry(delayMs: number, reason: EffectivelyOnceError): Promise<void> {
    this.reason = reason;
    const { client, queueUrl } = this.options;
    if (client === undefined || queueUrl === undefined || this.raw.ReceiptHandle === undefined)
      return;
    const seconds = cappedVisibilitySeconds(Math.max(0, delayMs) / 1000, this.receivedAt);
    try {
      await changeVisibility(client, queueUrl, this.raw.ReceiptHandle, seconds, this.hardStop);
    } catch (cause) {
      throw new BrokerError(`retry: change visibility to ${seconds} s`, cause, {
        details: { queueUrl, messageIds: [this.raw.MessageId], key: this.key },
      });
    }
  }

  async deadLetter(reason: EffectivelyOnceError): Promise<void> {
    this.reason = reason;
    const { client, queueUrl, deadLetterQueueUrl } = this.options;
    if (client === undefined || deadLetterQueueUrl === undefined) return;
    try {
      await sendToDeadLetterQueue(
        client,
        deadLetterQueueUrl,
        queueUrl ?? '',
        this.raw,
        reason,
        this.hardStop,
      );
    } catch (cause) {
      throw new BrokerError('send to dead-letter queue', cause, {
        details: { queueUrl, deadLetterQueueUrl, messageIds: [this.raw.MessageId], key: this.key },
      });
    }
    this.movedToDeadLetterQueue = true;
  }

  async release(): Promise<void> {}

  /** The error handleMessage throws so sqs-consumer keeps the message. */
  failure(outcome: DeliveryOutcome): EffectivelyOnceError {
    if (outcome === 'released') return new ShutdownError(this.key ?? '(no key)');
    return (
      this.reason ??
      new BrokerError(`settle (${outcome})`, new Error(`message was ${outcome}, not processed`), {
        details: { messageIds: [this.raw.MessageId], key: this.key, outcome },
      })
    );
  }
}

/** The queue's attributes, or undefined when this client may not read them. */
async function readQueueAttributes(
  client: SQSClient,
  queueUrl: string,
): Promise<Record<string, string> | undefined> {
  try {
    const output = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }),
    );
    return output.Attributes ?? {};
  } catch (cause) {
    if (isAccessDenied(cause)) return undefined;
    throw new BrokerError('get queue attributes', cause, { details: { queueUrl } });
  }
}
