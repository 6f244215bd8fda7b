import type { Message } from '@aws-sdk/client-sqs';
import type { Delivery } from '../../src/types.js';
import type { SqsDelivery } from './delivery.js';

/**
 * The SQS `Message` behind a delivery from {@link sqsSource} (for its attributes,
 * `MessageId`, `ReceiptHandle`...), or `undefined` for a delivery from another source.
 *
 * ```ts
 * handler: async (order, { tx, delivery }) => {
 *   const sentAt = sqsMessage(delivery)?.Attributes?.SentTimestamp;
 * }
 * ```
 */
export function sqsMessage(delivery: Delivery<unknown>): Message | undefined {
  return isSqsDelivery(delivery) ? delivery.raw : undefined;
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
