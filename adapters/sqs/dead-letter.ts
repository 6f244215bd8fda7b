import { createHash } from 'node:crypto';
import {
  SendMessageCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { EffectivelyOnceError } from '../../src/errors.js';
import { SQS_LIMITS } from './limits.js';
import { isFifoQueueUrl } from './options.js';

/**
 * Message attribute added to a dead letter: a JSON object with `code`, `message`,
 * `queueUrl`, `messageId` and `receiveCount`, plus `groupId` and `deduplicationId` for a
 * FIFO original.
 */
export const DEAD_LETTER_ERROR_ATTRIBUTE = 'EffectivelyOnce-Error';

const MAX_ERROR_TEXT = 1000;

/** SQS's classic message size limit (a queue's default `MaximumMessageSize` for years), bytes. */
const CLASSIC_MAX_MESSAGE_BYTES = 262_144;
/** The largest `MaximumMessageSize` a queue can have, bytes. */
const MAX_MESSAGE_BYTES = 1_048_576;

/** Why the error attribute was left off a dead letter, if it was. */
export type ErrorAttributeSkipped = 'attribute-limit' | 'size-limit';

/**
 * Copies a message to the dead-letter queue: same body, same message attributes, plus
 * {@link DEAD_LETTER_ERROR_ATTRIBUTE} when SQS's limit of 10 attributes leaves room and
 * the attribute cannot push the message over a size limit it met before (a message that
 * fit 256 KiB stays within it; none may pass 1 MiB): a dead letter refused for its size
 * would never leave the source queue. A FIFO dead-letter queue gets the original
 * `MessageGroupId` and a `MessageDeduplicationId` of the dead letter's own
 * ({@link deadLetterDeduplicationId}), so sending the same dead letter twice within five
 * minutes stores it once, and no other dead letter is ever taken for it. Returns why the
 * error attribute was left off, if it was. `signal` (the consumer's hard stop) cancels the send.
 */
export async function sendToDeadLetterQueue(
  client: SQSClient,
  deadLetterQueueUrl: string,
  sourceQueueUrl: string,
  message: Message,
  reason: EffectivelyOnceError,
  signal?: AbortSignal,
): Promise<{ errorAttribute: boolean; skipped?: ErrorAttributeSkipped }> {
  const attributes = copyAttributes(message.MessageAttributes);
  const error: MessageAttributeValue = {
    DataType: 'String',
    StringValue: JSON.stringify({
      code: reason.code,
      message: reason.message.slice(0, MAX_ERROR_TEXT),
      queueUrl: sourceQueueUrl,
      messageId: message.MessageId,
      receiveCount: message.Attributes?.ApproximateReceiveCount,
      groupId: message.Attributes?.MessageGroupId,
      deduplicationId: message.Attributes?.MessageDeduplicationId,
    }),
  };
  const skipped = errorAttributeSkipped(message.Body ?? '', attributes, error);
  if (skipped === undefined) attributes[DEAD_LETTER_ERROR_ATTRIBUTE] = error;
  const fifo = isFifoQueueUrl(deadLetterQueueUrl);
  await client.send(
    new SendMessageCommand({
      QueueUrl: deadLetterQueueUrl,
      MessageBody: message.Body ?? '',
      MessageAttributes: attributes,
      ...(fifo
        ? {
            MessageGroupId: message.Attributes?.MessageGroupId ?? 'dead-letters',
            MessageDeduplicationId: deadLetterDeduplicationId(sourceQueueUrl, message),
          }
        : {}),
    }),
    { abortSignal: signal },
  );
  return skipped === undefined ? { errorAttribute: true } : { errorAttribute: false, skipped };
}

/**
 * The `MessageDeduplicationId` of a dead letter on a FIFO queue: a SHA-256 of the source
 * queue and the original's `MessageId` (64 hex characters, within SQS's 128 and its
 * charset). Not the original's own dedup id: a FIFO dead-letter queue deduplicates it
 * queue-wide for five minutes, and that id is not unique to the original. The same event
 * fanned out to two source queues sharing the dead-letter queue (an SNS FIFO topic) has
 * it in both; a `DeduplicationScope=messageGroup` source has it in several groups. The
 * second dead letter would be accepted and not stored, then its original deleted: lost.
 * The `MessageId` is unique per message and stays the same across its redeliveries, so a
 * dead letter sent again (a crash after the send, before the delete) is still stored once.
 * The queue is taken from the URL's path (account and name), so two endpoint spellings of
 * one queue agree.
 */
export function deadLetterDeduplicationId(sourceQueueUrl: string, message: Message): string {
  const id =
    message.MessageId ??
    // sqs-consumer and sqsSource always have one; a hand-made Message may not.
    `body:${message.Attributes?.MessageDeduplicationId ?? ''}:${message.Body ?? ''}`;
  return createHash('sha256')
    .update(`${queueIdentity(sourceQueueUrl)}\n${id}`)
    .digest('hex');
}

function queueIdentity(queueUrl: string): string {
  try {
    return new URL(queueUrl).pathname;
  } catch {
    return queueUrl;
  }
}

/** Whether (and why) the error attribute must stay off this dead letter. */
export function errorAttributeSkipped(
  body: string,
  attributes: Record<string, MessageAttributeValue>,
  error: MessageAttributeValue,
): ErrorAttributeSkipped | undefined {
  if (Object.keys(attributes).length >= SQS_LIMITS.maxMessageAttributes) return 'attribute-limit';
  const before = messageBytes(body, attributes);
  const after = before + attributeBytes(DEAD_LETTER_ERROR_ATTRIBUTE, error);
  if (before <= CLASSIC_MAX_MESSAGE_BYTES && after > CLASSIC_MAX_MESSAGE_BYTES) return 'size-limit';
  if (after > MAX_MESSAGE_BYTES) return 'size-limit';
  return undefined;
}

/** A message's size as SQS counts it: the body plus each attribute's name, type and value. */
export function messageBytes(
  body: string,
  attributes: Record<string, MessageAttributeValue>,
): number {
  let total = Buffer.byteLength(body, 'utf8');
  for (const [name, value] of Object.entries(attributes)) total += attributeBytes(name, value);
  return total;
}

function attributeBytes(name: string, value: MessageAttributeValue): number {
  return (
    Buffer.byteLength(name, 'utf8') +
    Buffer.byteLength(value.DataType ?? '', 'utf8') +
    (value.StringValue === undefined ? 0 : Buffer.byteLength(value.StringValue, 'utf8')) +
    (value.BinaryValue?.byteLength ?? 0)
  );
}

/** Received attribute values carry empty list fields SendMessage rejects; keep the settable ones. */
function copyAttributes(
  received: Record<string, MessageAttributeValue> | undefined,
): Record<string, MessageAttributeValue> {
  const copy: Record<string, MessageAttributeValue> = {};
  for (const [name, value] of Object.entries(received ?? {})) {
    if (name === DEAD_LETTER_ERROR_ATTRIBUTE) continue;
    copy[name] = {
      DataType: value.DataType,
      ...(value.StringValue === undefined ? {} : { StringValue: value.StringValue }),
      ...(value.BinaryValue === undefined ? {} : { BinaryValue: value.BinaryValue }),
    };
  }
  return copy;
}
