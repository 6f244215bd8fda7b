import type { Message } from '@aws-sdk/client-sqs';
import { ConfigurationError, InvalidKeyError } from '../../src/errors.js';
import { keyFromFunction, type KeyResult } from '../../src/keys.js';
import { OUTBOX_ID_HEADER } from '../../src/outbox/record.js';
import type { DeduplicationScope } from './options.js';

/** Where a message's dedup key comes from; see {@link defaultKey}. */
export interface KeyOptions {
  fifo: boolean;
  /** The FIFO queue deduplicates per message group: a dedup id alone is not unique. */
  groupScoped?: boolean;
  /** The attribute a string `key` option names. */
  keyAttribute: string | undefined;
  /** A function `key` option. */
  key: ((message: Message) => string | undefined) | undefined;
}

/**
 * The dedup key of one SQS message, as the source's `key` option says:
 * - `key(message)` when `key` is a function;
 * - the String (or Number) message attribute it names when `key` is a string;
 * - the String attribute `eo-outbox-id` when present: the message came from an outbox
 *   relay, and the outbox id names the logical message however often it was sent;
 * - otherwise {@link defaultKey}.
 */
export function messageKey(message: Message, options: KeyOptions): KeyResult {
  if (options.key !== undefined)
    return keyFromFunction(options.key, message, { messageId: message.MessageId });
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
  const outboxId = message.MessageAttributes?.[OUTBOX_ID_HEADER]?.StringValue;
  if (outboxId !== undefined && outboxId !== '') return { key: outboxId };
  return { key: defaultKey(message, options.fifo, options.groupScoped === true) };
}

/**
 * FIFO queues: `MessageDeduplicationId` (set by the producer, or the body's SHA-256
 * with content-based deduplication), so a producer's retry of one send keeps its key;
 * on a queue that deduplicates per message group (`groupScoped`), the same dedup id in
 * two groups is two messages, so the key is the group id, a space and the dedup id (`g1 order-7`; SQS
 * allows no space in either id, so the pair cannot be read two ways).
 * Standard queues: `MessageId`, which SQS mints per send: it deduplicates SQS's own
 * redeliveries, not a producer that sends the same thing twice.
 */
export function defaultKey(
  message: Message,
  fifo: boolean,
  groupScoped = false,
): string | undefined {
  if (fifo) {
    const deduplicationId = message.Attributes?.MessageDeduplicationId;
    if (deduplicationId !== undefined && deduplicationId !== '') {
      if (!groupScoped) return deduplicationId;
      const group = message.Attributes?.MessageGroupId;
      // Without its group the id is ambiguous: no key, so the runner dead-letters it.
      return group === undefined || group === '' ? undefined : `${group} ${deduplicationId}`;
    }
  }
  return message.MessageId;
}

/**
 * Whether a FIFO queue's attributes say it deduplicates per message group. A
 * `deduplicationScope` option that contradicts the queue is a configuration error:
 * keyed the queue-wide way, two groups' messages with one dedup id would be one.
 */
export function groupScoped(
  attributes: Record<string, string>,
  options: { queueUrl: string; deduplicationScope: DeduplicationScope | undefined },
): boolean {
  const actual = attributes.DeduplicationScope;
  const expected = options.deduplicationScope;
  if (actual === 'queue' || actual === 'messageGroup') {
    if (expected !== undefined && expected !== actual) {
      throw new ConfigurationError(
        'deduplicationScope',
        `is '${expected}' but queue ${options.queueUrl} deduplicates per '${actual}'`,
        { queueUrl: options.queueUrl, queueScope: actual },
      );
    }
    return actual === 'messageGroup';
  }
  return expected === 'messageGroup';
}
