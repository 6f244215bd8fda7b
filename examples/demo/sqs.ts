import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SQSClient,
  type ReceiveMessageCommandOutput,
} from '@aws-sdk/client-sqs';

/** An SQS client for an emulator or AWS. Emulators accept any credentials. */
export function sqsClient(endpoint: string | undefined): SQSClient {
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
 * Calls `onReceive(n)` with the number of messages every ReceiveMessage returns: the
 * demo's count of deliveries, taken where SQS hands them out.
 */
export function countReceives(client: SQSClient, onReceive: (messages: number) => void): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      if (context.commandName === 'ReceiveMessageCommand') {
        onReceive((result.output as ReceiveMessageCommandOutput).Messages?.length ?? 0);
      }
      return result;
    },
    { step: 'initialize', name: 'demoCountReceives' },
  );
}

/** The demo's queue and its dead-letter queue. */
export interface DemoQueues {
  queueUrl: string;
  deadLetterQueueUrl: string;
  delete(): Promise<void>;
}

/**
 * Creates `<prefix>` with a redrive policy to `<prefix>-dlq`. The visibility timeout is
 * short on purpose (see faults.ts); maxReceiveCount is generous because receives also
 * count the redeliveries the faults cause, which are not poison.
 */
export async function createQueues(
  client: SQSClient,
  prefix: string,
  visibilityTimeoutSeconds: number,
): Promise<DemoQueues> {
  const dlq = await client.send(new CreateQueueCommand({ QueueName: `${prefix}-dlq` }));
  const deadLetterQueueUrl = required(dlq.QueueUrl, 'dead-letter queue URL');
  const attributes = await client.send(
    new GetQueueAttributesCommand({ QueueUrl: deadLetterQueueUrl, AttributeNames: ['QueueArn'] }),
  );
  const created = await client.send(
    new CreateQueueCommand({
      QueueName: prefix,
      Attributes: {
        VisibilityTimeout: String(visibilityTimeoutSeconds),
        RedrivePolicy: JSON.stringify({
          deadLetterTargetArn: required(attributes.Attributes?.QueueArn, 'dead-letter queue ARN'),
          maxReceiveCount: 10,
        }),
      },
    }),
  );
  const queueUrl = required(created.QueueUrl, 'queue URL');
  return {
    queueUrl,
    deadLetterQueueUrl,
    delete: async () => {
      await Promise.allSettled([
        client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })),
        client.send(new DeleteQueueCommand({ QueueUrl: deadLetterQueueUrl })),
      ]);
    },
  };
}

/** Messages still in a queue: visible, in flight, and delayed. */
export async function queueDepth(client: SQSClient, queueUrl: string): Promise<number> {
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
  if (value === undefined) throw new Error(`SQS returned no ${what}`);
  return value;
}
