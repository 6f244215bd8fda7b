import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SendMessageBatchCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { sqsSource } from 'effectively-once/sqs';
import type { BrokerEnv, DemoBroker } from './broker.js';
import { FAULTS } from './faults.js';
import { IDEMPOTENCY_KEY, type Charge } from './payments.js';

/** An SQS client for an emulator or AWS. Emulators accept any credentials. */
function sqsClient(endpoint: string | undefined): SQSClient {
  const region = process.env['AWS_REGION'] ?? process.env['AWS_DEFAULT_REGION'] ?? 'us-east-1';
  const credentials = process.env['AWS_ACCESS_KEY_ID']
    ? undefined
    : { accessKeyId: 'demo', secretAccessKey: 'demo' };
  return new SQSClient({
    region,
    ...(endpoint ? { endpoint } : {}),
    ...(credentials ? { credentials } : {}),
  });
}

/**
 * Creates `eo-demo-<random>` with a redrive policy to its own DLQ. The visibility
 * timeout is short on purpose (see faults.ts); maxReceiveCount is generous because
 * receives also count the redeliveries the faults cause, which are not poison.
 */
export async function startSqsBroker(
  endpoint: string | undefined,
  description: string,
): Promise<DemoBroker> {
  const client = sqsClient(endpoint);
  const prefix = `eo-demo-${randomBytes(4).toString('hex')}`;
  const dlq = await client.send(new CreateQueueCommand({ QueueName: `${prefix}-dlq` }));
  const deadLetterQueueUrl = required(dlq.QueueUrl, 'dead-letter queue URL');
  const arn = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: deadLetterQueueUrl, AttributeNames: ['QueueArn'] }),
  );
  const created = await client.send(
    new CreateQueueCommand({
      QueueName: prefix,
      Attributes: {
        VisibilityTimeout: String(FAULTS.visibilityTimeoutSeconds),
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: required(arn.Attributes?.QueueArn, 'dead-letter queue ARN'),
          maxReceiveCount: 10,
        }),
      },
    }),
  );
  const queueUrl = required(created.QueueUrl, 'queue URL');
  return {
    description,
    env: { DEMO_BROKER: 'sqs', DEMO_SQS_ENDPOINT: endpoint ?? '', DEMO_QUEUE_URL: queueUrl },
    faults: (slow) =>
      `${slow} slow handlers outlived the ${FAULTS.visibilityTimeoutSeconds} s visibility timeout (heartbeat off)`,
    send: async (charges: Charge[]) => {
      const output = await client.send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: charges.map((charge, i) => ({
            Id: String(i),
            MessageBody: JSON.stringify(charge),
            MessageAttributes: {
              [IDEMPOTENCY_KEY]: { DataType: 'String', StringValue: charge.chargeId },
            },
          })),
        }),
      );
      const failed = output.Failed ?? [];
      if (failed.length > 0)
        throw new Error(`${failed.length} entries failed: ${failed[0]?.Message ?? ''}`);
    },
    backlog: async () => ({
      pending: await queueDepth(client, queueUrl),
      deadLetters: await queueDepth(client, deadLetterQueueUrl),
    }),
    close: async () => {
      await Promise.allSettled([
        client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })),
        client.send(new DeleteQueueCommand({ QueueUrl: deadLetterQueueUrl })),
      ]);
      client.destroy();
    },
  };
}

/** The payment workers' SQS source. */
export function sqsWorkerSource(env: BrokerEnv) {
  const client = sqsClient(env['DEMO_SQS_ENDPOINT'] || undefined);
  const source = sqsSource<Charge>({
    client,
    queueUrl: required(env['DEMO_QUEUE_URL'], 'DEMO_QUEUE_URL'),
    key: IDEMPOTENCY_KEY,
    waitTimeSeconds: 1,
    // Off on purpose: a slow handler then outlives the visibility timeout and SQS
    // delivers its message again while it runs. Keep it on in production.
    heartbeat: false,
  });
  return { source, close: () => client.destroy() };
}

/** Messages still in a queue: visible, in flight, and delayed. */
async function queueDepth(client: SQSClient, queueUrl: string): Promise<number> {
  const { Attributes: a = {} } = await client.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  return (
    Number(a.ApproximateNumberOfMessages ?? 0) +
    Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
    Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
  );
}

function required<T>(value: T | undefined, what: string): T {
  if (value === undefined || value === '') throw new Error(`missing ${what}`);
  return value;
}
