import {
  SendMessageCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { EffectivelyOnceError } from '../../src/errors.js';
import { SQS_LIMITS, isFifoQueueUrl } from './options.js';

/** Message attribute added to a dead letter: JSON `{ code, message, queueUrl, messageId, receiveCount }`. */
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
 * `MessageGroupId` and `MessageDeduplicationId` (or the `MessageId`), so sending the same
 * dead letter twice within five minutes stores it once. Returns why the error attribute
 * was left off, if it was.
 */
export async function sendToDeadLetterQueue(
  client: SQSClient,
  deadLetterQueueUrl: string,
  sourceQueueUrl: string,
  message: Message,
  reason: EffectivelyOnceError,
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
            MessageDeduplicationId: message.Attributes?.MessageDeduplicationId ?? message.MessageId,
          }
        : {}),
    }),
  );
  return skipped === undefined ? { errorAttribute: true } : { errorAttribute: false, skipped };
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
