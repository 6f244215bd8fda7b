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

/**
 * Copies a message to the dead-letter queue: same body, same message attributes, plus
 * {@link DEAD_LETTER_ERROR_ATTRIBUTE} when SQS's limit of 10 attributes leaves room.
 * A FIFO dead-letter queue gets the original `MessageGroupId` and
 * `MessageDeduplicationId` (or the `MessageId`), so sending the same dead letter twice
 * within five minutes stores it once. Returns whether the error attribute was added.
 */
export async function sendToDeadLetterQueue(
  client: SQSClient,
  deadLetterQueueUrl: string,
  sourceQueueUrl: string,
  message: Message,
  reason: EffectivelyOnceError,
): Promise<{ errorAttribute: boolean }> {
  const attributes = copyAttributes(message.MessageAttributes);
  const errorAttribute = Object.keys(attributes).length < SQS_LIMITS.maxMessageAttributes;
  if (errorAttribute) {
    attributes[DEAD_LETTER_ERROR_ATTRIBUTE] = {
      DataType: 'String',
      StringValue: JSON.stringify({
        code: reason.code,
        message: reason.message.slice(0, MAX_ERROR_TEXT),
        queueUrl: sourceQueueUrl,
        messageId: message.MessageId,
        receiveCount: message.Attributes?.ApproximateReceiveCount,
      }),
    };
  }
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
  return { errorAttribute };
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
