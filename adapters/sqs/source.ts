import {
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type Message,
} from '@aws-sdk/client-sqs';
import { BrokerError, type EffectivelyOnceError } from '../../src/errors.js';
import { silentLogger } from '../../src/logger.js';
import type { DeliveryOutcome, Logger, Source, SourceContext } from '../../src/types.js';
import { isAbort, isAccessDenied, isQueueMissing } from './aws-errors.js';
import { decodeBody } from './body.js';
import { DeleteBatcher } from './delete-batcher.js';
import { SqsMessageDelivery, type RedriveMode } from './delivery.js';
import { Heartbeat } from './heartbeat.js';
import { HeldBackReceives } from './hold-backs.js';
import { groupScoped, messageKey } from './keys.js';
import { resolveSqsOptions, type ResolvedSqsOptions, type SqsSourceOptions } from './options.js';
import { retryDelay } from '../../src/backoff.js';
import { sleep } from '../../src/sleep.js';

/** SQS's default visibility timeout, used when the queue's own cannot be read. */
const DEFAULT_VISIBILITY_TIMEOUT = 30;

/** Pause after a short poll (`waitTimeSeconds: 0`) found nothing, so an idle queue is not hammered. */
const EMPTY_SHORT_POLL_PAUSE_MS = 200;

/** What the start-up check learned about the queue. */
interface QueueFacts {
  visibilityTimeout: number;
  /** `undefined`: could not be read. */
  hasRedrivePolicy: boolean | undefined;
  /** FIFO: the queue deduplicates per message group, so keys include the group. */
  groupScoped: boolean;
}

/**
 * Consumes one SQS queue: long-polls it within the runner's free capacity, turns each
 * message into an `SqsMessageDelivery`, keeps messages invisible while they are
 * handled, and deletes them in batches once the runner acks. FIFO messages of one
 * `MessageGroupId` are delivered one after the other; when one is not done (retried,
 * released), the rest of its group received with it are released so SQS redelivers
 * the group in order.
 */
export class SqsSource<T> implements Source<T> {
  /** `sqs:` and the queue URL. */
  readonly description: string;
  private readonly options: ResolvedSqsOptions<T>;
  private readonly deleter: DeleteBatcher;
  private readonly live = new Set<SqsMessageDelivery<T>>();
  private readonly groups = new Set<Promise<void>>();
  private readonly heldBack = new HeldBackReceives();
  private facts: QueueFacts;
  private ctx: SourceContext<T> | undefined;
  private running = false;

  constructor(options: SqsSourceOptions<T>) {
    this.options = resolveSqsOptions(options);
    this.description = `sqs:${this.options.queueUrl}`;
    this.facts = {
      visibilityTimeout: this.options.visibilityTimeout ?? DEFAULT_VISIBILITY_TIMEOUT,
      hasRedrivePolicy: undefined,
      groupScoped: this.options.deduplicationScope === 'messageGroup',
    };
    this.deleter = new DeleteBatcher(this.options.client, this.options.queueUrl, {
      delayMs: this.options.deleteBatchDelayMs,
      attempts: this.options.deleteAttempts,
      onRetry: (error) => this.report(error),
    });
  }

  /** Receives until `ctx.signal` aborts (see `Source.run`). */
  async run(ctx: SourceContext<T>): Promise<void> {
    if (this.running) throw new Error(`${this.description} is already running`);
    this.running = true;
    this.ctx = ctx;
    this.deleter.cancelOn(ctx.hardStop);
    try {
      if (this.options.verifyQueue) await this.verify(ctx);
      await Promise.all(
        Array.from({ length: this.options.receiveConcurrency }, () => this.poll(ctx)),
      );
    } finally {
      this.running = false;
    }
  }

  /** Flushes pending acks and releases what the source created (see `Source.close`). */
  async close(): Promise<void> {
    await Promise.all([...this.live].map((delivery) => delivery.stopHeartbeat()));
    await Promise.all([...this.groups]);
    await this.deleter.flush();
  }

  private async poll(ctx: SourceContext<T>): Promise<void> {
    let failures = 0;
    while (!ctx.signal.aborted) {
      const free = ctx.freeCapacity();
      if (free < 1) {
        await ctx.waitForCapacity();
        continue;
      }
      let messages: Message[];
      try {
        messages = await this.receive(Math.min(this.options.batchSize, free), ctx.signal);
        failures = 0;
      } catch (cause) {
        if (ctx.signal.aborted) break;
        const missing = isQueueMissing(cause);
        this.report(
          new BrokerError('receive', cause, {
            retryable: !missing,
            details: {
              queueUrl: this.options.queueUrl,
              ...(missing ? { reason: 'queue does not exist' } : {}),
            },
          }),
        );
        failures += 1;
        await sleep(retryDelay(failures, this.options.pollErrorBackoff), ctx.signal);
        continue;
      }
      if (messages.length === 0) {
        if (this.options.waitTimeSeconds === 0) await sleep(EMPTY_SHORT_POLL_PAUSE_MS, ctx.signal);
        continue;
      }
      const receivedAt = Date.now();
      const deliveries = messages.flatMap((message) => this.toDelivery(message, receivedAt, ctx));
      if (ctx.signal.aborted) {
        // Stopped while the receive was returning: hand the messages straight back.
        await this.releaseAll(deliveries);
        break;
      }
      this.dispatch(ctx, deliveries);
    }
  }

  private async receive(max: number, signal: AbortSignal): Promise<Message[]> {
    try {
      const output = await this.options.client.send(
        new ReceiveMessageCommand({
          QueueUrl: this.options.queueUrl,
          MaxNumberOfMessages: max,
          WaitTimeSeconds: this.options.waitTimeSeconds,
          VisibilityTimeout: this.facts.visibilityTimeout,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
        { abortSignal: signal },
      );
      return output.Messages ?? [];
    } catch (error) {
      if (isAbort(error) && signal.aborted) return [];
      throw error;
    }
  }

  /** Reads the queue's visibility timeout and redrive policy; fails fast when a queue is missing. */
  private async verify(ctx: SourceContext<T>): Promise<void> {
    const { queueUrl, deadLetterQueueUrl } = this.options;
    const attributes = await this.queueAttributes(ctx, queueUrl);
    if (attributes !== undefined) {
      const visibility = Number(attributes.VisibilityTimeout);
      if (
        this.options.visibilityTimeout === undefined &&
        Number.isInteger(visibility) &&
        visibility > 0
      ) {
        this.facts.visibilityTimeout = visibility;
      }
      this.facts.hasRedrivePolicy =
        attributes.RedrivePolicy !== undefined && attributes.RedrivePolicy !== '';
      if (this.options.fifo) this.facts.groupScoped = groupScoped(attributes, this.options);
    }
    if (deadLetterQueueUrl !== undefined) {
      await this.queueAttributes(ctx, deadLetterQueueUrl);
    } else if (this.facts.hasRedrivePolicy === false) {
      this.logger.warn(
        { queueUrl },
        'queue has no RedrivePolicy and deadLetterQueueUrl is not set: dead letters will be parked invisible for up to 12 h',
      );
    }
    const heartbeat = this.heartbeatIntervalMs();
    if (heartbeat !== undefined && heartbeat >= this.facts.visibilityTimeout * 1000) {
      this.logger.warn(
        {
          queueUrl,
          heartbeatSeconds: heartbeat / 1000,
          visibilityTimeout: this.facts.visibilityTimeout,
        },
        'heartbeat interval is not shorter than the visibility timeout: messages may become visible mid-handler',
      );
    }
  }

  /**
   * GetQueueAttributes with retries on transient errors. A missing queue rejects at
   * once; missing permission is logged and treated as "unknown" (the check is optional).
   */
  private async queueAttributes(
    ctx: SourceContext<T>,
    queueUrl: string,
  ): Promise<Record<string, string> | undefined> {
    for (let failures = 0; !ctx.signal.aborted; failures += 1) {
      try {
        const output = await this.options.client.send(
          new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }),
          { abortSignal: ctx.signal },
        );
        return output.Attributes ?? {};
      } catch (cause) {
        if (ctx.signal.aborted) return undefined;
        if (isQueueMissing(cause)) {
          // run() rejects with it; the consumer reports it as its `error` event.
          throw new BrokerError('get queue attributes', cause, {
            retryable: false,
            details: { queueUrl, reason: 'queue does not exist' },
          });
        }
        if (isAccessDenied(cause)) {
          this.logger.warn(
            { queueUrl, err: cause },
            'cannot read queue attributes; assuming defaults',
          );
          return undefined;
        }
        this.report(new BrokerError('get queue attributes', cause, { details: { queueUrl } }));
        await sleep(retryDelay(failures + 1, this.options.pollErrorBackoff), ctx.signal);
      }
    }
    return undefined;
  }

  private toDelivery(
    message: Message,
    receivedAt: number,
    ctx: SourceContext<T>,
  ): SqsMessageDelivery<T>[] {
    if (message.ReceiptHandle === undefined) {
      this.logger.warn(
        { queueUrl: this.options.queueUrl, messageId: message.MessageId },
        'message without receipt handle ignored',
      );
      return [];
    }
    const withHandle = message as Message & { ReceiptHandle: string };
    const { key, rejection: keyRejection } = messageKey(message, {
      fifo: this.options.fifo,
      groupScoped: this.facts.groupScoped,
      keyAttribute: this.options.keyAttribute,
      key: this.options.key,
    });
    const decoded = decodeBody(message, this.options.parse, this.options.queueUrl);
    const rejection: EffectivelyOnceError | undefined = decoded.ok ? keyRejection : decoded.error;
    const receiveCount = Number(message.Attributes?.ApproximateReceiveCount);
    const delivery = new SqsMessageDelivery<T>(
      {
        message: withHandle,
        receivedAt,
        key,
        body: decoded.ok ? decoded.body : (undefined as T),
        attempt: this.heldBack.attempt(
          message.MessageId,
          Number.isInteger(receiveCount) && receiveCount > 0 ? receiveCount : 1,
        ),
        orderingKey: this.options.fifo ? message.Attributes?.MessageGroupId : undefined,
        rejection,
      },
      {
        client: this.options.client,
        queueUrl: this.options.queueUrl,
        deleter: this.deleter,
        logger: this.logger,
        deadLetterQueueUrl: this.options.deadLetterQueueUrl,
        redriveMode: () => this.redriveMode(),
        hardStop: ctx.hardStop,
      },
    );
    const intervalMs = this.heartbeatIntervalMs();
    if (intervalMs !== undefined) {
      delivery.attachHeartbeat(
        new Heartbeat({
          client: this.options.client,
          queueUrl: this.options.queueUrl,
          receiptHandle: withHandle.ReceiptHandle,
          messageId: message.MessageId,
          receivedAt,
          visibilityTimeout: this.facts.visibilityTimeout,
          intervalMs,
          onLost: (error) => {
            ctx.reportError(error);
            delivery.lose(error);
          },
          onError: (error) => ctx.reportError(error),
          signal: ctx.hardStop,
        }),
      );
    }
    this.live.add(delivery);
    return [delivery];
  }

  /** Standard queues: everything at once. FIFO: one group after the other message. */
  private dispatch(ctx: SourceContext<T>, deliveries: SqsMessageDelivery<T>[]): void {
    const groups = new Map<string | SqsMessageDelivery<T>, SqsMessageDelivery<T>[]>();
    for (const delivery of deliveries) {
      const group = this.options.fifo ? (delivery.orderingKey ?? delivery) : delivery;
      const list = groups.get(group);
      if (list === undefined) groups.set(group, [delivery]);
      else list.push(delivery);
    }
    for (const list of groups.values()) {
      const running = this.runGroup(ctx, list);
      this.groups.add(running);
      void running.finally(() => this.groups.delete(running));
    }
  }

  private async runGroup(
    ctx: SourceContext<T>,
    deliveries: SqsMessageDelivery<T>[],
  ): Promise<void> {
    for (const [index, delivery] of deliveries.entries()) {
      if (ctx.signal.aborted && index > 0) {
        await this.releaseAll(deliveries.slice(index));
        return;
      }
      const outcome = await this.deliverOne(ctx, delivery);
      if (index < deliveries.length - 1 && !this.groupMayContinue(outcome)) {
        const followers = deliveries.slice(index + 1);
        for (const follower of followers) this.heldBack.record(follower.raw.MessageId);
        await this.releaseAll(followers);
        return;
      }
    }
  }

  private async deliverOne(
    ctx: SourceContext<T>,
    delivery: SqsMessageDelivery<T>,
  ): Promise<DeliveryOutcome> {
    try {
      return await ctx.deliver(delivery);
    } finally {
      await delivery.stopHeartbeat();
      this.live.delete(delivery);
    }
  }

  /** A FIFO group may go on only when its previous message is gone from the queue. */
  private groupMayContinue(outcome: DeliveryOutcome): boolean {
    if (outcome === 'processed' || outcome === 'duplicate') return true;
    return outcome === 'dead-lettered' && this.options.deadLetterQueueUrl !== undefined;
  }

  /** Makes never-delivered messages visible again at once (a released message keeps its receive count). */
  private async releaseAll(deliveries: SqsMessageDelivery<T>[]): Promise<void> {
    await Promise.all(
      deliveries.map(async (delivery) => {
        try {
          await delivery.release();
        } catch (error) {
          this.report(
            error instanceof BrokerError
              ? error
              : new BrokerError('release', error, { details: { queueUrl: this.options.queueUrl } }),
          );
        } finally {
          this.live.delete(delivery);
        }
      }),
    );
  }

  private heartbeatIntervalMs(): number | undefined {
    const { heartbeat } = this.options;
    if (heartbeat === false) return undefined;
    if (heartbeat === true) return (this.facts.visibilityTimeout * 1000) / 3;
    return heartbeat * 1000;
  }

  private redriveMode(): RedriveMode {
    return this.facts.hasRedrivePolicy === false ? 'park' : 'redrive';
  }

  private get logger(): Logger {
    return this.ctx?.logger ?? silentLogger;
  }

  private report(error: EffectivelyOnceError): void {
    if (this.ctx !== undefined) this.ctx.reportError(error);
    else this.logger.error({ err: error }, error.message);
  }
}

/**
 * An SQS `Source` for `createConsumer`. Options are validated here, against SQS
 * limits; a missing queue is detected when the consumer starts.
 */
export function sqsSource<T = unknown>(options: SqsSourceOptions<T>): SqsSource<T> {
  return new SqsSource(options);
}
