import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { SQS_CREDENTIALS, SQS_REGION } from '../../kit/services/index.js';
import { encodeMessage, newMessage } from '../message.js';

/** Visibility timeout of bench queues: far above any drain's per-message time, so nothing is redelivered. */
export const VISIBILITY_TIMEOUT_S = 120;

export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({ region: SQS_REGION, endpoint, credentials: SQS_CREDENTIALS });
}

/** A fresh standard queue per scenario run, so runs never see each other's messages. */
export async function createQueue(client: SQSClient, tag: string): Promise<string> {
  const name = `bench-${tag}-${randomBytes(4).toString('hex')}`;
  const { QueueUrl } = await client.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: { VisibilityTimeout: String(VISIBILITY_TIMEOUT_S) },
    }),
  );
  if (QueueUrl === undefined) throw new Error(`CreateQueue ${name} returned no URL`);
  return QueueUrl;
}

export async function deleteQueue(client: SQSClient, queueUrl: string): Promise<void> {
  await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
}

/** Sends ids 0..n-1 with SendMessageBatch (10 per request, `parallel` requests at once). */
export async function fillQueue(
  client: SQSClient,
  queueUrl: string,
  n: number,
  parallel = 8,
): Promise<void> {
  let next = 0;
  const sender = async (): Promise<void> => {
    for (let start = next; start < n; start = next) {
      next = Math.min(n, start + 10);
      const sentAt = Date.now();
      const entries = [];
      for (let id = start; id < next; id++) {
        entries.push({ Id: String(id), MessageBody: encodeMessage(newMessage(id, sentAt)) });
      }
      const out = await client.send(
        new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }),
      );
      if (out.Failed !== undefined && out.Failed.length > 0) {
        throw new Error(
          `SendMessageBatch failed for ${out.Failed.length} entries: ${out.Failed[0]?.Message}`,
        );
      }
    }
  };
  await Promise.all(Array.from({ length: parallel }, sender));
}

/** Messages still in the queue (visible or in flight); 0 once a scenario deleted everything. */
export async function queueDepth(client: SQSClient, queueUrl: string): Promise<number> {
  const { Attributes } = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(Attributes?.ApproximateNumberOfMessages ?? NaN) +
    Number(Attributes?.ApproximateNumberOfMessagesNotVisible ?? NaN)
  );
}
