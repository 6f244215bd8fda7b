import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { ConfigurationError } from '../../../src/errors.js';
import { withDedup, withDedupBatch, type WithDedupOptions } from '../../../adapters/sqs/index.js';
import { FakeSqs } from './fake-sqs.js';

// Never connects: options are validated before anything touches the database.
const pool = new pg.Pool({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });
const sqs = new FakeSqs();
const base: WithDedupOptions = { name: 'legacy', pool };

function optionOf(options: Partial<WithDedupOptions>): string | undefined {
  try {
    withDedup(async () => undefined, { ...base, ...options });
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as ConfigurationError).details.option as string;
  }
}

describe('withDedup options', () => {
  it('names the bad option', () => {
    expect(optionOf({ client: sqs.client })).toBe('queueUrl');
    expect(optionOf({ deadLetterQueueUrl: 'http://127.0.0.1:9/q-dlq' })).toBe('deadLetterQueueUrl');
    expect(optionOf({ key: '' })).toBe('key');
    expect(optionOf({ concurrency: 0 })).toBe('concurrency');
    expect(
      optionOf({
        client: sqs.client,
        queueUrl: 'http://127.0.0.1:9/q',
        key: 'Idempotency-Key',
      }),
    ).toBeUndefined();
  });

  it('exposes sqs-consumer-shaped handlers that can be passed unbound', () => {
    const worker = withDedupBatch(async () => undefined, base);
    const { handleMessage, handleMessageBatch } = worker;
    expect(typeof handleMessage).toBe('function');
    expect(typeof handleMessageBatch).toBe('function');
    expect(worker.consumer.stats().received).toBe(0);
  });
});
