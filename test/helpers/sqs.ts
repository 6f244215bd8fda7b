import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  type QueueAttributeName,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
  type Message,
  type SendMessageCommandInput,
} from '@aws-sdk/client-sqs';
import { sqsEndpoint } from './env.js';

/** A client for the SQS emulator (ElasticMQ or LocalStack) the integration tests run against. */
export function testSqsClient(): SQSClient {
  return new SQSClient({
    region: 'us-east-1',
    endpoint: sqsEndpoint(),
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
}

/** Queues created by one test file, deleted by `cleanup()`. */
export class TestQueues {
  readonly client = testSqsClient();
  private readonly created: string[] = [];

  /**
   * Creates a queue with a unique name (`prefix-<random>`, `.fifo` when asked). With
   * `maxReceiveCount`, also creates a dead-letter queue and a RedrivePolicy to it.
   */
  async create(
    prefix: string,
    options: {
      fifo?: boolean;
      visibilityTimeout?: number;
      maxReceiveCount?: number;
      attributes?: Record<string, string>;
    } = {},
  ): Promise<{ url: string; dlqUrl: string | undefined }> {
    const name = `${prefix}-${randomBytes(4).toString('hex')}`;
    const fifo = options.fifo === true;
    const base: Record<string, string> = {
      VisibilityTimeout: String(options.visibilityTimeout ?? 30),
      ...(fifo ? { FifoQueue: 'true' } : {}),
      ...options.attributes,
    };
    let dlqUrl: string | undefined;
    if (options.maxReceiveCount !== undefined) {
      dlqUrl = await this.createRaw(
        `${name}-dlq${fifo ? '.fifo' : ''}`,
        fifo ? { FifoQueue: 'true' } : {},
      );
      const arn = await this.attribute(dlqUrl, 'QueueArn');
      base.RedrivePolicy = JSON.stringify({
        maxReceiveCount: String(options.maxReceiveCount),
        deadLetterTargetArn: arn,
      });
    }
    const url = await this.createRaw(`${name}${fifo ? '.fifo' : ''}`, base);
    return { url, dlqUrl };
  }

  async send(
    url: string,
    body: string,
    input: Partial<SendMessageCommandInput> = {},
  ): Promise<string> {
    const output = await this.client.send(
      new SendMessageCommand({ QueueUrl: url, MessageBody: body, ...input }),
    );
    return output.MessageId!;
  }

  /** Messages in the queue: visible, in flight and delayed. */
  async depth(
    url: string,
  ): Promise<{ visible: number; inFlight: number; delayed: number; total: number }> {
    const out = await this.client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }),
    );
    const n = (name: QueueAttributeName) => Number(out.Attributes?.[name] ?? 0);
    const visible = n('ApproximateNumberOfMessages');
    const inFlight = n('ApproximateNumberOfMessagesNotVisible');
    const delayed = n('ApproximateNumberOfMessagesDelayed');
    return { visible, inFlight, delayed, total: visible + inFlight + delayed };
  }

  /** Receives (and leaves in flight for `visibilityTimeout` s) every visible message, for inspection. */
  async drain(url: string, visibilityTimeout = 30): Promise<Message[]> {
    const messages: Message[] = [];
    for (;;) {
      const out = await this.client.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 0,
          VisibilityTimeout: visibilityTimeout,
          MessageAttributeNames: ['All'],
          MessageSystemAttributeNames: ['All'],
        }),
      );
      if (!out.Messages?.length) return messages;
      messages.push(...out.Messages);
    }
  }

  async cleanup(): Promise<void> {
    await Promise.all(
      this.created.map((url) =>
        this.client.send(new DeleteQueueCommand({ QueueUrl: url })).catch(() => undefined),
      ),
    );
    this.client.destroy();
  }

  private async createRaw(name: string, attributes: Record<string, string>): Promise<string> {
    const out = await this.client.send(
      new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
    );
    this.created.push(out.QueueUrl!);
    return out.QueueUrl!;
  }

  private async attribute(url: string, name: QueueAttributeName): Promise<string> {
    const out = await this.client.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }),
    );
    const value = out.Attributes?.[name];
    if (value === undefined) throw new Error(`queue ${url} has no attribute ${name}`);
    return value;
  }
}
