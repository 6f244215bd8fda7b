import type { Message, MessageAttributeValue } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { EffectivelyOnceError } from '../../src/errors.js';
import { keyFromFunction } from '../../src/keys.js';
import type { Delivery, MessagingInfo } from '../../src/types.js';
import { sentTimestampOf, sqsMessaging } from '../sqs/delivery.js';
import { messageKey } from '../sqs/keys.js';

/** Where a record's dedup key comes from (the resolved `key` and `deduplicationScope` options). */
export interface RecordKeyOptions {
  /** A message attribute's name, or a function of the record; undefined: the SQS default. */
  readonly key: string | ((record: SQSRecord) => string | undefined) | undefined;
  /** FIFO queue deduplicating per message group: the default key is `group dedupId`. */
  readonly groupScoped: boolean;
}

/**
 * One record of an invocation's event as a delivery. Lambda's event source mapping owns
 * the message: settling only records the verdict, and the invocation's answer
 * (`batchItemFailures`) deletes it or not. `ack` is the one outcome that finishes it.
 */
export class RecordDelivery implements Delivery<SQSRecord> {
  readonly key: string | undefined;
  readonly rejection: EffectivelyOnceError | undefined;
  readonly payload: string;
  readonly attempt: number;
  readonly orderingKey: string | undefined;
  /** Set by `ack`: committed, or committed before (a duplicate). */
  finished = false;
  private readonly message: Message;

  constructor(
    readonly raw: SQSRecord,
    keys: RecordKeyOptions,
    /** The invocation's deadline less the margin (see `deadlineMarginMs`); undefined: none known. */
    readonly workDeadline: number | undefined,
  ) {
    this.message = sdkMessage(raw);
    const derived =
      typeof keys.key === 'function'
        ? keyFromFunction(keys.key, raw, { messageId: raw.messageId })
        : messageKey(this.message, {
            fifo: true,
            groupScoped: keys.groupScoped,
            keyAttribute: keys.key,
            key: undefined,
          });
    this.key = derived.key;
    this.rejection = derived.rejection;
    this.payload = raw.body;
    const count = Number(raw.attributes?.ApproximateReceiveCount);
    this.attempt = Number.isInteger(count) && count > 0 ? count : 1;
    this.orderingKey = raw.attributes?.MessageGroupId;
  }

  get body(): SQSRecord {
    return this.raw;
  }

  /** `SentTimestamp`, for the admission floor. */
  get firstSentAt(): Date | undefined {
    return sentTimestampOf(this.message);
  }

  messaging(): MessagingInfo {
    return sqsMessaging(this.message, queueUrlOf(this.raw.eventSourceARN));
  }

  async ack(): Promise<void> {
    this.finished = true;
  }

  // A record not acked is answered in `batchItemFailures`: it comes back after the queue's
  // visibility timeout, and to the queue's dead-letter queue after its maxReceiveCount.
  async retry(): Promise<void> {}
  async deadLetter(): Promise<void> {}
  async release(): Promise<void> {}
}

/**
 * The record in the SDK's `Message` shape, so its key is derived exactly as `sqsSource`
 * and `withDedup` derive it (a worker moving between them re-applies nothing in flight).
 */
export function sdkMessage(record: SQSRecord): Message {
  const attributes: Record<string, MessageAttributeValue> = {};
  for (const [name, value] of Object.entries(record.messageAttributes ?? {})) {
    attributes[name] = {
      DataType: value.dataType,
      ...(value.stringValue !== undefined ? { StringValue: value.stringValue } : {}),
    };
  }
  return {
    MessageId: record.messageId,
    ReceiptHandle: record.receiptHandle,
    Body: record.body,
    MD5OfBody: record.md5OfBody,
    Attributes: { ...record.attributes },
    MessageAttributes: attributes,
  };
}

/** `arn:aws:sqs:<region>:<account>:<name>` → a path ending in the queue's name, for telemetry. */
function queueUrlOf(arn: string | undefined): string | undefined {
  if (arn === undefined) return undefined;
  const parts = arn.split(':');
  return parts.length >= 6 ? `${parts[3]}/${parts[4]}/${parts[5]}` : arn;
}
