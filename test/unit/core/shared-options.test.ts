import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import { ConfigurationError } from '../../../src/errors.js';
import {
  DOOR_DEFAULTS,
  resolveSharedOptions,
  type DoorDefaults,
  type SharedOptions,
} from '../../../src/shared-options.js';

// Never queried: the resolver only checks that it is a pool.
const pool = { connect: () => undefined } as unknown as Pool;
const shape = { type: 'TestTelemetry', methods: ['start'] };
const resolve = (options: Partial<SharedOptions<{ start(): void }>>, door: DoorDefaults) =>
  resolveSharedOptions({ pool, ...options }, door, shape);

describe('the shared options resolver', () => {
  it('takes a data layer that has the functions the claim calls, and refuses anything else', () => {
    const layer = {
      name: 'fake',
      transaction: async <T>(_s: unknown, body: (tx: string) => Promise<T>) => body('tx'),
      sql: () => ({ query: async () => ({ rows: [], rowCount: 0 }) }),
      serverError: (e: unknown) => e,
    };
    expect(resolve({}, DOOR_DEFAULTS.consumer).dataLayer).toBeUndefined();
    expect(resolve({ dataLayer: layer }, DOOR_DEFAULTS.consumer).dataLayer).toBe(layer);
    for (const bad of [
      null,
      'prisma',
      {},
      { ...layer, serverError: undefined },
      { ...layer, sql: 1 },
    ]) {
      let thrown: unknown;
      try {
        resolve({ dataLayer: bad as never }, DOOR_DEFAULTS.consumer);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ConfigurationError);
      expect((thrown as ConfigurationError).details).toMatchObject({ option: 'dataLayer' });
    }
  });

  it('gives every door the same defaults where the doors agree', () => {
    for (const door of Object.values(DOOR_DEFAULTS)) {
      expect(resolve({}, door)).toMatchObject({
        pool,
        migrate: true,
        isolationLevel: undefined,
        serializationRetries: 3,
        acquireTimeoutMs: 10_000,
        lockTimeoutMs: 5000,
        maxKeyLength: 255,
        telemetry: undefined,
      });
      expect(resolve({}, door).table).toEqual({ schema: 'public', table: door.table });
    }
  });

  it('fills in the per-door defaults of the table, retention and handler timeout', () => {
    const consumer = resolve({}, DOOR_DEFAULTS.consumer);
    expect(consumer.table.table).toBe('processed_messages');
    expect(consumer.retention).toBeUndefined();
    expect(consumer.handlerTimeoutMs).toBe(60_000);
    const http = resolve({}, DOOR_DEFAULTS.http);
    expect(http.table.table).toBe('eo_idempotency_keys');
    expect(http.retention).toEqual({
      olderThanMs: 24 * 3600_000,
      intervalMs: 60_000,
      batchSize: 1000,
      dutyCycle: 0.5,
    });
    expect(http.handlerTimeoutMs).toBe(30_000);
    const relay = resolve({}, DOOR_DEFAULTS.relay);
    expect(relay.table.table).toBe('eo_outbox');
    expect(relay.retention).toBeUndefined();
  });

  it('turns retention off with false on every door, and on with only olderThanMs where it has no default', () => {
    for (const door of Object.values(DOOR_DEFAULTS))
      expect(resolve({ retention: false }, door).retention).toBeUndefined();
    expect(resolve({ retention: { olderThanMs: 5 } }, DOOR_DEFAULTS.consumer).retention).toEqual({
      olderThanMs: 5,
      intervalMs: 60_000,
      batchSize: 1000,
      dutyCycle: 0.5,
    });
    expect(resolve({ retention: { intervalMs: 100 } }, DOOR_DEFAULTS.http).retention).toMatchObject(
      { olderThanMs: 24 * 3600_000, intervalMs: 100 },
    );
  });

  it('accepts each bound itself', () => {
    const door = DOOR_DEFAULTS.consumer;
    expect(resolve({ maxKeyLength: 1 }, door).maxKeyLength).toBe(1);
    expect(resolve({ maxKeyLength: 1024 }, door).maxKeyLength).toBe(1024);
    expect(resolve({ handlerTimeoutMs: 0 }, door).handlerTimeoutMs).toBe(0);
    expect(resolve({ handlerTimeoutMs: 86_400_000 }, door).handlerTimeoutMs).toBe(86_400_000);
    expect(resolve({ lockTimeoutMs: 1 }, door).lockTimeoutMs).toBe(1);
    expect(resolve({ lockTimeoutMs: 3_600_000 }, door).lockTimeoutMs).toBe(3_600_000);
    expect(resolve({ acquireTimeoutMs: 3_600_000 }, door).acquireTimeoutMs).toBe(3_600_000);
    expect(resolve({ serializationRetries: 0 }, door).serializationRetries).toBe(0);
    expect(resolve({ serializationRetries: 100 }, door).serializationRetries).toBe(100);
    expect(resolve({ isolationLevel: 'serializable' }, door).isolationLevel).toBe('serializable');
    expect(
      resolve({ retention: { olderThanMs: 1, intervalMs: 86_400_000 } }, door).retention,
    ).toMatchObject({ olderThanMs: 1, intervalMs: 86_400_000 });
  });

  it.each([
    [{ pool: {} }, 'pool'],
    [{ schema: '' }, 'schema'],
    [{ table: 'a\u0000b' }, 'table'],
    [{ migrate: 'yes' }, 'migrate'],
    [{ isolationLevel: 'snapshot' }, 'isolationLevel'],
    [{ telemetry: {} }, 'telemetry'],
    [{ serializationRetries: -1 }, 'serializationRetries'],
    [{ serializationRetries: 101 }, 'serializationRetries'],
    [{ acquireTimeoutMs: 0 }, 'acquireTimeoutMs'],
    [{ acquireTimeoutMs: 3_600_001 }, 'acquireTimeoutMs'],
    [{ lockTimeoutMs: 0 }, 'lockTimeoutMs'],
    [{ lockTimeoutMs: 3_600_001 }, 'lockTimeoutMs'],
    [{ handlerTimeoutMs: -1 }, 'handlerTimeoutMs'],
    [{ handlerTimeoutMs: 86_400_001 }, 'handlerTimeoutMs'],
    [{ handlerTimeoutMs: 1.5 }, 'handlerTimeoutMs'],
    [{ maxKeyLength: 0 }, 'maxKeyLength'],
    [{ maxKeyLength: 1025 }, 'maxKeyLength'],
    [{ retention: 'daily' }, 'retention'],
    [{ retention: {} }, 'retention.olderThanMs'],
    [{ retention: { olderThanMs: 0 } }, 'retention.olderThanMs'],
    [{ retention: { olderThanMs: 1, intervalMs: 99 } }, 'retention.intervalMs'],
    [{ retention: { olderThanMs: 1, intervalMs: 86_400_001 } }, 'retention.intervalMs'],
    [{ retention: { olderThanMs: 1, batchSize: 0 } }, 'retention.batchSize'],
    [{ retention: { olderThanMs: 1, batchSize: 100_001 } }, 'retention.batchSize'],
    [{ retention: { olderThanMs: 1, dutyCycle: 0 } }, 'retention.dutyCycle'],
    [{ retention: { olderThanMs: 1, dutyCycle: 1.01 } }, 'retention.dutyCycle'],
  ])('refuses %j with a ConfigurationError naming the option', (bad, option) => {
    let thrown: unknown;
    try {
      resolve(bad as unknown as Partial<SharedOptions<{ start(): void }>>, DOOR_DEFAULTS.consumer);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigurationError);
    expect((thrown as ConfigurationError).details).toMatchObject({ option });
  });

  it('refuses a retention without olderThanMs only where the door has no default', () => {
    expect(() => resolve({ retention: {} }, DOOR_DEFAULTS.relay)).toThrow(ConfigurationError);
    expect(resolve({ retention: {} }, DOOR_DEFAULTS.http).retention?.olderThanMs).toBe(
      24 * 3600_000,
    );
  });
});
