/**
 * Options that pre-release builds spelled differently are refused at construction, never
 * ignored: a key option dropped without a word makes every resend a new key (applied
 * again), a timeout dropped changes how long a claim waits.
 */
import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { exactlyOnceEachMessage, kafkaSource } from '../../../adapters/kafka/index.js';
import { sqsSource, withDedup, withDedupBatch } from '../../../adapters/sqs/index.js';
import { ConfigurationError } from '../../../src/errors.js';
import { createIdempotency } from '../../../src/http/index.js';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';

const pool = { connect: async () => undefined, query: async () => undefined } as unknown as Pool;
const handler = async (): Promise<void> => undefined;

/** What construction threw, as the option it names. */
function refused(make: () => unknown): unknown {
  try {
    make();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as ConfigurationError).details.option;
  }
  return 'accepted';
}

describe('options renamed before the first release', () => {
  it("createConsumer: `key` (the source's option now)", () => {
    const options = { name: 'c', source: memorySource(), pool, handler, key: () => 'k' };
    expect(refused(() => createConsumer(options as never))).toBe('key');
  });

  it('createIdempotency: `waitMs` and `timeoutMs`', () => {
    expect(refused(() => createIdempotency({ pool, waitMs: 100 } as never))).toBe('waitMs');
    expect(refused(() => createIdempotency({ pool, timeoutMs: 100 } as never))).toBe('timeoutMs');
  });

  it('sqsSource, withDedup, withDedupBatch: `keyAttribute`', () => {
    const client = { send: async () => ({}) };
    const queueUrl = 'http://127.0.0.1:9324/000000000000/q';
    expect(refused(() => sqsSource({ client, queueUrl, keyAttribute: 'Id' } as never))).toBe(
      'keyAttribute',
    );
    expect(refused(() => withDedup(handler, { pool, keyAttribute: 'Id' } as never))).toBe(
      'keyAttribute',
    );
    expect(refused(() => withDedupBatch(handler, { pool, keyAttribute: 'Id' } as never))).toBe(
      'keyAttribute',
    );
  });

  it('kafkaSource, exactlyOnceEachMessage: `idempotencyHeader`', () => {
    expect(refused(() => kafkaSource({ kafka: {}, idempotencyHeader: 'id' } as never))).toBe(
      'idempotencyHeader',
    );
    expect(
      refused(() => exactlyOnceEachMessage(handler, { pool, idempotencyHeader: 'id' } as never)),
    ).toBe('idempotencyHeader');
  });
});
