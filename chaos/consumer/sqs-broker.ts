import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { DEAD_LETTER_ERROR_ATTRIBUTE } from 'effectively-once/sqs';
import { sleep } from '../../src/sleep.js';
import { IDEMPOTENCY_ATTRIBUTE, type ChaosBroker, type DeadLetter } from './broker-api.js';
import type { Send } from './plan.js';

const IN_FLIGHT_BATCHES = 8;

/**
 * A standard queue and an explicit dead-letter queue (`deadLetterQueueUrl`, no redrive
 * policy): with a redrive policy, SQS itself would move any message received
 * `maxReceiveCount` times, and every kill inflates receive counts. Lambda mode has no
 * other way (a function does not send dead letters): `maxReceiveCount` sets the redrive
 * policy, high enough that kills and restarts alone do not reach it.
 */
export async function createSqsBroker(
  endpoint: string,
  runId: string,
  maxReceiveCount?: number,
): Promise<ChaosBroker> {
  const client = new SQSClient({
    region: 'us-east-1',
    endpoint,
    credentials: { accessKeyId: 'chaos', secretAccessKey: 'chaos' },
  });
  const create = async (name: string, redrive?: string): Promise<string> => {
    const out = await client.send(
      new CreateQueueCommand({
        QueueName: name,
        Attributes: {
          VisibilityTimeout: '5',
          ...(redrive === undefined ? {} : { RedrivePolicy: redrive }),
        },
      }),
    );
    if (out.QueueUrl === undefined) throw new Error(`CreateQueue ${name} returned no URL`);
    return out.QueueUrl;
  };
  const deadLetterQueueUrl = await create(`chaos-${runId}-dlq`);
  const redrive =
    maxReceiveCount === undefined
      ? undefined
      : JSON.stringify({
          deadLetterTargetArn: await queueArn(client, deadLetterQueueUrl),
          maxReceiveCount,
        });
  const queueUrl = await create(`chaos-${runId}`, redrive);

  const depth = async (url: string): Promise<number> => {
    const out = await client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }),
    );
    const a = out.Attributes ?? {};
    return [
      'ApproximateNumberOfMessages',
      'ApproximateNumberOfMessagesNotVisible',
      'ApproximateNumberOfMessagesDelayed',
    ]
      .map((name) => Number(a[name as keyof typeof a] ?? 0))
      .reduce((x, y) => x + y, 0);
  };

  return {
    worker: { kind: 'sqs', endpoint, queueUrl, deadLetterQueueUrl, maxReceiveCount },
    codedDeadLetters: maxReceiveCount === undefined,

    async send(sends, signal) {
      let resent = 0;
      const batches: Send[][] = [];
      for (let i = 0; i < sends.length; i += 10) batches.push(sends.slice(i, i + 10));
      let next = 0;
      const lane = async (): Promise<void> => {
        while (next < batches.length && !signal.aborted) {
          let batch = batches[next++] ?? [];
          for (let attempt = 1; batch.length > 0 && !signal.aborted; attempt++) {
            if (attempt > 1) {
              resent += batch.length;
              await sleep(Math.min(100 * attempt, 2000));
            }
            try {
              const out = await client.send(
                new SendMessageBatchCommand({
                  QueueUrl: queueUrl,
                  Entries: batch.map((s, i) => ({
                    Id: String(i),
                    MessageBody: s.body,
                    MessageAttributes: {
                      [IDEMPOTENCY_ATTRIBUTE]: { DataType: 'String', StringValue: s.key },
                    },
                  })),
                }),
              );
              const failed = new Set((out.Failed ?? []).map((f) => Number(f.Id)));
              batch = batch.filter((_, i) => failed.has(i));
            } catch {
              /* whole request failed: send the batch again */
            }
          }
        }
      };
      await Promise.all(Array.from({ length: IN_FLIGHT_BATCHES }, lane));
      return { resent };
    },

    async drained() {
      return (await depth(queueUrl)) === 0;
    },

    deadLetterCount: () => depth(deadLetterQueueUrl),

    async deadLetters() {
      const letters: DeadLetter[] = [];
      for (let empty = 0; empty < 2;) {
        const out = await client.send(
          new ReceiveMessageCommand({
            QueueUrl: deadLetterQueueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 0,
            VisibilityTimeout: 600,
            MessageAttributeNames: ['All'],
          }),
        );
        const messages = out.Messages ?? [];
        if (messages.length === 0) empty++;
        for (const m of messages)
          letters.push({
            key:
              m.MessageAttributes?.[IDEMPOTENCY_ATTRIBUTE]?.StringValue ??
              `(no key: ${m.MessageId})`,
            code: errorCode(m.MessageAttributes?.[DEAD_LETTER_ERROR_ATTRIBUTE]?.StringValue),
          });
      }
      return letters;
    },

    async close(cleanup) {
      if (cleanup) {
        for (const url of [queueUrl, deadLetterQueueUrl]) {
          await client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined);
        }
      }
      client.destroy();
    },
  };
}

/** A queue's ARN, for a redrive policy's target. */
async function queueArn(client: SQSClient, queueUrl: string): Promise<string> {
  const out = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }),
  );
  const arn = out.Attributes?.QueueArn;
  if (arn === undefined) throw new Error(`GetQueueAttributes ${queueUrl} returned no QueueArn`);
  return arn;
}

/** The `code` of the adapter's error attribute (JSON `{ code, message, ... }`). */
function errorCode(attribute: string | undefined): string | undefined {
  if (attribute === undefined) return undefined;
  try {
    const code = (JSON.parse(attribute) as { code?: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  } catch {
    return undefined;
  }
}
