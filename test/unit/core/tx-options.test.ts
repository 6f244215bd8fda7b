/**
 * Issue 11: the new consumer options `isolationLevel`, `serializationRetries` (0..100)
 * and `acquireTimeoutMs` are validated at construction like the others: a bad value is
 * a ConfigurationError (EO_CONFIGURATION) naming the option. (Needs the new options:
 * does not typecheck before the fix.)
 */
import { afterAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';

const pool = new pg.Pool({ host: '127.0.0.1', port: 1, max: 20 });
afterAll(async () => pool.end());

function build(extra: Record<string, unknown>): () => void {
  return () =>
    createConsumer({
      name: 'tx-options',
      source: memorySource(),
      pool,
      handler: async () => undefined,
      ...extra,
    });
}

function configurationError(extra: Record<string, unknown>): unknown {
  try {
    build(extra)();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('new transaction options', () => {
  it.each(['read committed', 'repeatable read', 'serializable'])(
    'isolationLevel %s is accepted',
    (isolationLevel) => {
      expect(build({ isolationLevel })).not.toThrow();
    },
  );

  it.each(['chaos', '', 42])('isolationLevel %p is rejected', (isolationLevel) => {
    expect(configurationError({ isolationLevel })).toMatchObject({
      code: 'EO_CONFIGURATION',
      details: { option: 'isolationLevel' },
    });
  });

  it.each([0, 3, 100])('serializationRetries %p is accepted', (serializationRetries) => {
    expect(build({ serializationRetries })).not.toThrow();
  });

  it.each([-1, 101, 1.5, '3'])('serializationRetries %p is rejected', (serializationRetries) => {
    expect(configurationError({ serializationRetries })).toMatchObject({
      code: 'EO_CONFIGURATION',
      details: { option: 'serializationRetries' },
    });
  });

  it.each([-1, 2.5, 'soon'])('acquireTimeoutMs %p is rejected', (acquireTimeoutMs) => {
    expect(configurationError({ acquireTimeoutMs })).toMatchObject({
      code: 'EO_CONFIGURATION',
      details: { option: 'acquireTimeoutMs' },
    });
  });

  it('acquireTimeoutMs 10000 (the default) is accepted', () => {
    expect(build({ acquireTimeoutMs: 10_000 })).not.toThrow();
  });
});
