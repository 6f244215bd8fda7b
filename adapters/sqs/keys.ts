import type { Message } from '@aws-sdk/client-sqs';
import { InvalidKeyError, describe } from '../../src/errors.js';

/** Where a message's dedup key comes from; see {@link defaultKey}. */
export interface KeyOptions {
  fifo: boolean;
  keyAttribute: string | undefined;
  key: ((message: Message) => string | undefined) | undefined;
}

/** A key, or the reason there is none (the runner dead-letters keyless deliveries). */
export type KeyResult = { key: string | undefined; rejection?: InvalidKeyError };

/**
 * The dedup key of one SQS message:
 * - `key(message)` when given;
 * - the String (or Number) message attribute `keyAttribute` when given;
 * - otherwise {@link defaultKey}.
 */
export function messageKey(message: Message, options: KeyOptions): KeyResult {
  if (options.key !== undefined) {
    try {
      return { key: options.key(message) };
    } catch (error) {
      return {
        key: undefined,
        rejection: new InvalidKeyError(`the key function threw: ${describe(error)}`, {
          messageId: message.MessageId,
        }),
      };
    }
  }
  if (options.keyAttribute !== undefined) {
    const attribute = message.MessageAttributes?.[options.keyAttribute];
    const value = attribute?.StringValue;
    if (value === undefined || value === '') {
      return {
        key: undefined,
        rejection: new InvalidKeyError(
          `message attribute "${options.keyAttribute}" is missing or not a string`,
          {
            messageId: message.MessageId,
            keyAttribute: options.keyAttribute,
          },
        ),
      };
    }
    return { key: value };
  }
  return { key: defaultKey(message, options.fifo) };
}

/**
 * FIFO queues: `MessageDeduplicationId` (set by the producer, or the body's SHA-256
 * with content-based deduplication), so a producer's retry of one send keeps its key.
 * Standard queues: `MessageId`, which SQS mints per send: it deduplicates SQS's own
 * redeliveries, not a producer that sends the same thing twice.
 */
export function defaultKey(message: Message, fifo: boolean): string | undefined {
  if (fifo) {
    const deduplicationId = message.Attributes?.MessageDeduplicationId;
    if (deduplicationId !== undefined && deduplicationId !== '') return deduplicationId;
  }
  return message.MessageId;
}
