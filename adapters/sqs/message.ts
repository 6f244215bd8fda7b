import type { Message } from '@aws-sdk/client-sqs';
import type { Delivery } from '../../src/types.js';
import type { SqsDelivery } from './delivery.js';

/**
 * The SQS `Message` behind a delivery from `sqsSource` (for its
 * attributes, `MessageId`, `ReceiptHandle`...). Throws a `TypeError` for a delivery of
 * another source, as `kafkaRecordOf` does; {@link isSqsDelivery} tells them apart.
 *
 * ```ts
 * handler: async (order, { tx, delivery }) => {
 *   const sentAt = sqsMessage(delivery).Attributes?.SentTimestamp;
 * }
 * ```
 */
export function sqsMessage(delivery: Delivery<unknown>): Message {
  if (!isSqsDelivery(delivery))
    throw new TypeError('sqsMessage: this delivery does not come from sqsSource()');
  return delivery.raw;
}

/** Whether a delivery came from an SQS source. */
export function isSqsDelivery<T>(delivery: Delivery<T>): delivery is SqsDelivery<T> {
  const candidate = delivery as Partial<SqsDelivery<T>>;
  return (
    typeof candidate.queueUrl === 'string' &&
    typeof candidate.raw === 'object' &&
    candidate.raw !== null &&
    typeof candidate.raw.ReceiptHandle === 'string'
  );
}
