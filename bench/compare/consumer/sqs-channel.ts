import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { Channel } from './channel.js';
import { ARM_ATTRIBUTE, KEY_ATTRIBUTE } from './contenders.js';

/**
 * The queue's visibility timeout: how long a killed worker's message stays invisible
 * before SQS hands it out again. Short so a run is quick, long enough that a live
 * worker (a few ms per message) never sees its own message come back.
 */
export const VISIBILITY_TIMEOUT_S = 2;

export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({
    region: 'us-east-1',
    endpoint,
    credentials: { accessKeyId: 'compare', secretAccessKey: 'compare' },
  });
}

/** A standard queue of its own, no redrive policy (a killed message must come back, not move). */
export async function sqsChannel(endpoint: string, name: string): Promise<Channel> {
  const client = sqsClient(endpoint);
  const created = await client.send(
    new CreateQueueCommand({
      QueueName: name,
      Attributes: { VisibilityTimeout: String(VISIBILITY_TIMEOUT_S) },
    }),
  );
  const queueUrl = created.QueueUrl;
  if (queueUrl === undefined) throw new Error(`CreateQueue ${name} returned no URL`);
  return {
    env: { kind: 'sqs', endpoint, queueUrl },
    async send(key, body, armed) {
      await client.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          MessageBody: body,
          MessageAttributes: {
            [KEY_ATTRIBUTE]: { DataType: 'String', StringValue: key },
            ...(armed ? { [ARM_ATTRIBUTE]: { DataType: 'String', StringValue: 'kill' } } : {}),
          },
        }),
      );
    },
    async backlog() {
      const { Attributes: a = {} } = await client.send(
        new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }),
      );
      return (
        Number(a.ApproximateNumberOfMessages ?? 0) +
        Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
        Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
      );
    },
    async close() {
      await client.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
      client.destroy();
    },
  };
}
