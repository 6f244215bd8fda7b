import { ChangeMessageVisibilityCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { SQS_LIMITS } from './limits.js';

/**
 * SQS rejects a visibility timeout that would end more than 12 hours after the receive
 * that issued the receipt handle. Returns `seconds` (rounded up) capped to what is left
 * of that window, with one second of margin for clock skew and latency; never negative.
 */
export function cappedVisibilitySeconds(
  seconds: number,
  receivedAt: number,
  now: number = Date.now(),
): number {
  const elapsed = Math.ceil(Math.max(0, now - receivedAt) / 1000) + 1;
  const left = Math.max(0, SQS_LIMITS.maxVisibilityTimeoutSeconds - elapsed);
  return Math.min(Math.max(0, Math.ceil(seconds)), left);
}

/**
 * Sets how long from now the message stays invisible (0 = visible again at once).
 * `signal` (the consumer's hard stop) cancels the request: a client without a request
 * timeout would wait without end for an endpoint that never answers.
 */
export async function changeVisibility(
  client: SQSClient,
  queueUrl: string,
  receiptHandle: string,
  seconds: number,
  signal?: AbortSignal,
): Promise<void> {
  await client.send(
    new ChangeMessageVisibilityCommand({
      QueueUrl: queueUrl,
      ReceiptHandle: receiptHandle,
      VisibilityTimeout: seconds,
    }),
    { abortSignal: signal },
  );
}
