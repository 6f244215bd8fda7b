import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { ConfigurationError } from '../../../src/errors.js';
import { createRelay, type RelayOptions } from '../../../src/outbox/index.js';

// Never queried: every case fails at construction, before any SQL.
const pool = { options: {}, connect: () => undefined } as unknown as Pool;
const publishers = { d: { publish: async () => undefined } };

describe('createRelay options', () => {
  it.each([
    [{ publishers: { d: {} } }, 'publishers'],
    [{ batchSize: 0 }, 'batchSize'],
    [{ leaseMs: 10 }, 'leaseMs'],
    [{ leaseMs: 10_000, publishTimeoutMs: 6000 }, 'publishTimeoutMs'],
    [{ pollIntervalMs: 1 }, 'pollIntervalMs'],
    [{ maxAttempts: 0 }, 'maxAttempts'],
    [{ backoff: { initialMs: 100, maxMs: 10 } }, 'backoff.maxMs'],
    [{ pool: {} }, 'pool'],
    [{ retention: { olderThanMs: 0 } }, 'retention.olderThanMs'],
    [{ retention: {} }, 'retention.olderThanMs'],
    [{ retention: { olderThanMs: 1, intervalMs: 5 } }, 'retention.intervalMs'],
    [{ retention: { olderThanMs: 1, dutyCycle: 0 } }, 'retention.dutyCycle'],
    [{ telemetry: { attach: () => undefined } }, 'telemetry'],
  ])('%j is refused, naming the option', (bad, option) => {
    let thrown: unknown;
    try {
      createRelay({ pool, publishers, ...bad } as RelayOptions);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigurationError);
    expect((thrown as ConfigurationError).details).toMatchObject({ option });
  });

  it('accepts the defaults', () => {
    const relay = createRelay({ pool, publishers });
    expect(relay.stats()).toEqual({ published: 0, failed: 0, parked: 0, fenced: 0, batches: 0 });
    expect(relay.owner).toMatch(/:\d+:[0-9a-f]{8}$/);
  });
});
