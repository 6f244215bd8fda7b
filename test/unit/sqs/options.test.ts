import { describe, expect, it } from '@jest/globals';
import { SQSClient } from '@aws-sdk/client-sqs';
import { ConfigurationError } from '../../../src/errors.js';
import { resolveSqsOptions, type SqsSourceOptions } from '../../../adapters/sqs/options.js';
import { cappedVisibilitySeconds } from '../../../adapters/sqs/visibility.js';
import { sqsSource } from '../../../adapters/sqs/index.js';

const client = new SQSClient({
  region: 'us-east-1',
  credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
});
const queueUrl = 'https://sqs.us-east-1.amazonaws.com/123456789012/orders';

function optionOf(options: Partial<SqsSourceOptions>): string | undefined {
  try {
    resolveSqsOptions({ client, queueUrl, ...options });
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as ConfigurationError).details.option as string;
  }
}

describe('sqsSource options', () => {
  it('applies the documented defaults', () => {
    const resolved = resolveSqsOptions({ client, queueUrl });
    expect(resolved).toMatchObject({
      batchSize: 10,
      waitTimeSeconds: 20,
      visibilityTimeout: undefined,
      heartbeat: true,
      parse: 'json',
      fifo: false,
      deleteBatchDelayMs: 10,
      deleteAttempts: 3,
      pollErrorBackoff: { initialMs: 1000, maxMs: 30_000 },
      verifyQueue: true,
    });
    expect(resolveSqsOptions({ client, queueUrl: `${queueUrl}.fifo` }).fifo).toBe(true);
  });

  it('reads a string key as the attribute to key by, a function as the key itself', () => {
    const byName = resolveSqsOptions({ client, queueUrl, key: 'Idempotency-Key' });
    expect(byName).toMatchObject({ keyAttribute: 'Idempotency-Key', key: undefined });
    const derive = (): string => 'k';
    const byFunction = resolveSqsOptions({ client, queueUrl, key: derive });
    expect(byFunction).toMatchObject({ keyAttribute: undefined, key: derive });
  });

  it.each<[string, Partial<SqsSourceOptions>]>([
    ['batchSize', { batchSize: 0 }],
    ['batchSize', { batchSize: 11 }],
    ['batchSize', { batchSize: 2.5 }],
    ['waitTimeSeconds', { waitTimeSeconds: 21 }],
    ['waitTimeSeconds', { waitTimeSeconds: -1 }],
    ['visibilityTimeout', { visibilityTimeout: 0 }],
    ['visibilityTimeout', { visibilityTimeout: 43_201 }],
    ['heartbeat', { heartbeat: 0 }],
    ['heartbeat', { heartbeat: 30, visibilityTimeout: 30 }],
    ['heartbeat', { heartbeat: 'yes' as unknown as boolean }],
    ['key', { key: '' }],
    ['key', { key: 42 as unknown as string }],
    ['parse', { parse: 'xml' as unknown as 'json' }],
    ['queueUrl', { queueUrl: '' }],
    ['queueUrl', { queueUrl: 'orders' }],
    ['deadLetterQueueUrl', { deadLetterQueueUrl: queueUrl }],
    ['deadLetterQueueUrl', { deadLetterQueueUrl: 'not a url' }],
    ['deleteBatchDelayMs', { deleteBatchDelayMs: -1 }],
    ['deleteAttempts', { deleteAttempts: 0 }],
    ['pollErrorBackoff.maxMs', { pollErrorBackoff: { initialMs: 500, maxMs: 100 } }],
    ['client', { client: {} as SQSClient }],
  ])('rejects a bad %s at construction', (option, options) => {
    expect(optionOf(options)).toBe(option);
  });

  it('accepts the SQS limits themselves', () => {
    expect(
      optionOf({ batchSize: 1, waitTimeSeconds: 0, visibilityTimeout: 43_200, heartbeat: 0.5 }),
    ).toBeUndefined();
    expect(
      optionOf({ batchSize: 10, waitTimeSeconds: 20, visibilityTimeout: 1, heartbeat: false }),
    ).toBeUndefined();
  });

  it('validates when the source is created, naming the option', () => {
    expect(() => sqsSource({ client, queueUrl, batchSize: 50 })).toThrow(
      /Invalid option "batchSize"/,
    );
    expect(sqsSource({ client, queueUrl }).description).toBe(`sqs:${queueUrl}`);
  });
});

describe('cappedVisibilitySeconds', () => {
  it('rounds up and caps at what is left of the 12 hour window of the receive', () => {
    const now = 1_000_000_000;
    expect(cappedVisibilitySeconds(1.2, now, now)).toBe(2);
    expect(cappedVisibilitySeconds(100_000, now, now)).toBe(43_199);
    expect(cappedVisibilitySeconds(100_000, now - 3_600_000, now)).toBe(43_200 - 3_600 - 1);
    expect(cappedVisibilitySeconds(30, now - 43_300_000, now)).toBe(0);
    expect(cappedVisibilitySeconds(-5, now, now)).toBe(0);
  });
});
