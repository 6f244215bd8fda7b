/**
 * Issue 32: the admission floor. A delivery first sent longer ago than the dedup window
 * keeps a claim is refused before its claim (`expired`, then dead-lettered). No database
 * is needed: a refused delivery never reaches it, and an admitted one is told apart by
 * what `admit()` returns. The real prune and late redelivery are in the integration suite
 * (sqs/admission-floor, kafka/admission-floor).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import {
  ConfigurationError,
  createConsumer,
  type Consumer,
  type ConsumerEvents,
  type ConsumerOptions,
  type Delivery,
} from '../../../src/index.js';
import { admit } from '../../../src/consumer/admission.js';
import { resolveConfig } from '../../../src/consumer/config.js';
import { ConsumerEventHub } from '../../../src/consumer/events.js';
import { Settler } from '../../../src/consumer/settle.js';
import { emptyStats } from '../../../src/consumer/stats.js';
import { Tracing } from '../../../src/consumer/tracing.js';
import { silentLogger } from '../../../src/logger.js';
import { memorySource } from '../../../src/testing/index.js';
import { ManualSource } from '../../helpers/manual-source.js';
import { otelHarness } from '../../helpers/otel.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const fakePool = { connect: () => undefined } as unknown as pg.Pool;

function options(extra: Partial<ConsumerOptions<unknown>> = {}): ConsumerOptions<unknown> {
  return {
    name: 'floor',
    source: memorySource(),
    pool: fakePool,
    handler: async () => undefined,
    ...extra,
  };
}

describe('admissionFloor: configuration', () => {
  it('is off without a window, on with retention: the window minus a tenth, at most an hour', () => {
    expect(resolveConfig(options()).admissionFloor).toBeUndefined();
    expect(resolveConfig(options({ retention: { olderThanMs: 14 * DAY } })).admissionFloor).toEqual(
      { lifetimeMs: 14 * DAY - HOUR, producerTimestamps: false },
    );
    expect(resolveConfig(options({ retention: { olderThanMs: 10_000 } })).admissionFloor).toEqual({
      lifetimeMs: 9_000,
      producerTimestamps: false,
    });
  });

  it('takes a margin, a window for a prune job, producer timestamps; false turns it off', () => {
    expect(
      resolveConfig(
        options({
          retention: { olderThanMs: DAY },
          admissionFloor: { marginMs: 60_000, producerTimestamps: true },
        }),
      ).admissionFloor,
    ).toEqual({ lifetimeMs: DAY - 60_000, producerTimestamps: true });
    expect(
      resolveConfig(options({ admissionFloor: { windowMs: 7 * DAY } })).admissionFloor,
    ).toEqual({ lifetimeMs: 7 * DAY - HOUR, producerTimestamps: false });
    // Beside retention, a shorter window (the old one, after retention was lengthened).
    expect(
      resolveConfig(
        options({ retention: { olderThanMs: 7 * DAY }, admissionFloor: { windowMs: DAY } }),
      ).admissionFloor,
    ).toEqual({ lifetimeMs: DAY - HOUR, producerTimestamps: false });
    expect(
      resolveConfig(options({ retention: { olderThanMs: DAY }, admissionFloor: false }))
        .admissionFloor,
    ).toBeUndefined();
  });

  it.each<[string, Partial<ConsumerOptions<unknown>>, string]>([
    ['asked for without a window', { admissionFloor: true }, 'admissionFloor'],
    [
      'a window longer than retention',
      { retention: { olderThanMs: DAY }, admissionFloor: { windowMs: DAY + 1 } },
      'admissionFloor.windowMs',
    ],
    [
      'a margin as long as the window',
      { retention: { olderThanMs: 1000 }, admissionFloor: { marginMs: 1000 } },
      'admissionFloor.marginMs',
    ],
    ['a window of 0', { admissionFloor: { windowMs: 0 } }, 'admissionFloor.windowMs'],
    [
      'producerTimestamps not a boolean',
      { admissionFloor: { windowMs: DAY, producerTimestamps: 'yes' as unknown as boolean } },
      'admissionFloor.producerTimestamps',
    ],
    ['not an object', { admissionFloor: 'on' as unknown as boolean }, 'admissionFloor'],
  ])('rejects %s (ConfigurationError naming the option)', (_what, extra, option) => {
    let thrown: unknown;
    try {
      resolveConfig(options(extra));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigurationError);
    expect((thrown as ConfigurationError).details['option']).toBe(option);
  });
});

/** `admit()` with a real settler; records what the delivery was told. */
function admitting(extra: Partial<ConsumerOptions<unknown>>) {
  const cfg = resolveConfig(options(extra));
  const hub = new ConsumerEventHub(silentLogger);
  const stats = emptyStats();
  const lifecycle = { stopping: false, hardStop: new AbortController().signal };
  const settler = new Settler(cfg, hub, stats, lifecycle, new Tracing(undefined, 'floor'));
  const expired: Array<ConsumerEvents['expired']> = [];
  hub.on('expired', (e) => expired.push(e));
  const reasons: string[] = [];
  return {
    stats,
    expired,
    reasons,
    admit: (fields: Partial<Delivery<unknown>>) => {
      const delivery: Delivery<unknown> = {
        key: 'k-1',
        body: {},
        payload: '{}',
        raw: undefined,
        attempt: 2,
        ack: async () => undefined,
        retry: async () => undefined,
        deadLetter: async (reason) => void reasons.push(reason.code),
        release: async () => undefined,
      };
      // Descriptors, not a spread: a getter stays a getter (and unread).
      Object.defineProperties(delivery, Object.getOwnPropertyDescriptors(fields));
      return admit(cfg, settler, lifecycle, delivery);
    },
  };
}

const ago = (ms: number) => new Date(Date.now() - ms);

describe('admissionFloor: admission', () => {
  it('refuses a broker timestamp older than the lifetime: expired, then dead-lettered', async () => {
    const floor = admitting({ retention: { olderThanMs: DAY } });
    const sentAt = ago(DAY);
    const admission = floor.admit({ firstSentAt: sentAt });
    expect('outcome' in admission && (await admission.outcome)).toBe('dead-lettered');
    expect(floor.reasons).toEqual(['EO_DELIVERY_EXPIRED']);
    expect(floor.stats).toMatchObject({ received: 1, expired: 1, deadLettered: 1 });
    expect(floor.expired).toEqual([
      {
        key: 'k-1',
        attempt: 2,
        firstSentAt: sentAt,
        ageMs: expect.any(Number),
        lifetimeMs: DAY - HOUR,
      },
    ]);
    expect(floor.expired[0]!.ageMs).toBeGreaterThanOrEqual(DAY);
  });

  it('admits what is younger than the lifetime, has no timestamp, or an invalid one', () => {
    const floor = admitting({ retention: { olderThanMs: DAY } });
    for (const firstSentAt of [ago(DAY - HOUR - 60_000), undefined, new Date(Number.NaN)]) {
      expect(floor.admit({ firstSentAt })).toEqual({ key: 'k-1', hash: expect.any(Buffer) });
    }
    expect(floor.stats.expired).toBe(0);
  });

  it('floors a producer timestamp only with producerTimestamps: true', async () => {
    const byDefault = admitting({ retention: { olderThanMs: DAY } });
    expect(byDefault.admit({ firstSentAt: ago(2 * DAY), firstSentBy: 'producer' })).toHaveProperty(
      'key',
      'k-1',
    );
    const trusted = admitting({
      retention: { olderThanMs: DAY },
      admissionFloor: { producerTimestamps: true },
    });
    const admission = trusted.admit({ firstSentAt: ago(2 * DAY), firstSentBy: 'producer' });
    expect('outcome' in admission && (await admission.outcome)).toBe('dead-lettered');
    expect(trusted.reasons).toEqual(['EO_DELIVERY_EXPIRED']);
  });

  it('off, never reads the timestamp', () => {
    const untouchable = {
      get firstSentAt(): Date {
        throw new Error('firstSentAt read');
      },
    };
    for (const extra of [{}, { retention: { olderThanMs: DAY }, admissionFloor: false as const }]) {
      const floor = admitting(extra);
      expect(floor.admit(untouchable)).toHaveProperty('key', 'k-1');
    }
  });

  it('checks the key first: an unusable key is dead-lettered as such, not as expired', async () => {
    const floor = admitting({ retention: { olderThanMs: DAY } });
    const admission = floor.admit({ key: '', firstSentAt: ago(2 * DAY) });
    expect('outcome' in admission && (await admission.outcome)).toBe('dead-lettered');
    expect(floor.reasons).toEqual(['EO_INVALID_KEY']);
    expect(floor.stats.expired).toBe(0);
  });
});

describe('admissionFloor: through a consumer', () => {
  const open: Array<{ consumer: Consumer; pool: pg.Pool }> = [];
  afterEach(async () => {
    for (const { consumer, pool } of open.splice(0)) {
      await consumer.stop({ timeoutMs: 1000 });
      await pool.end();
    }
  });

  async function started(extra: Partial<ConsumerOptions<unknown>>) {
    // Never connected: an expired delivery must be settled without the database.
    const pool = new pg.Pool({ host: '127.0.0.1', port: 1, max: 20 });
    pool.on('error', () => undefined);
    const source = new ManualSource<unknown>();
    const consumer = createConsumer({
      name: 'floor',
      source,
      pool,
      migrate: false,
      handler: async () => {
        throw new Error('the handler must not run');
      },
      retention: { olderThanMs: DAY, intervalMs: 86_400_000 },
      ...extra,
    });
    open.push({ consumer, pool });
    const events: string[] = [];
    consumer.on('expired', (e) => events.push(`expired ${e.key}`));
    consumer.on('dead-lettered', (e) => events.push(`dead-lettered ${e.key} ${e.error.code}`));
    await consumer.start();
    return { source, consumer, events };
  }

  it.each([
    ['one transaction per message', {}],
    ['batch mode', { batch: { maxSize: 10, maxWaitMs: 0 } }],
  ])('%s: the expired event, then the dead letter with its reason', async (_mode, extra) => {
    const { source, consumer, events } = await started(extra);
    const result = await source.push({ key: 'late', body: {}, firstSentAt: ago(2 * DAY) });
    expect(result.outcome).toBe('dead-lettered');
    expect(result.calls).toEqual(['deadLetter']);
    expect(result.deadLetterReason?.code).toBe('EO_DELIVERY_EXPIRED');
    expect(events).toEqual(['expired late', 'dead-lettered late EO_DELIVERY_EXPIRED']);
    expect(consumer.stats()).toMatchObject({ expired: 1, deadLettered: 1, processed: 0 });
  });

  it('reports `effectively_once.outcome` expired on the span and the metric', async () => {
    const otel = otelHarness();
    try {
      const { source } = await started({ telemetry: otel.telemetry });
      await source.push({ key: 'late', body: {}, firstSentAt: ago(2 * DAY) });
      const span = otel.spans().find((s) => s.attributes['effectively_once.outcome'] !== undefined);
      expect(span?.attributes['effectively_once.outcome']).toBe('expired');
      expect(span?.attributes['error.type']).toBe('EO_DELIVERY_EXPIRED');
      const points = await otel.points('effectively_once.deliveries');
      expect(points.map((p) => p.attributes['effectively_once.outcome'])).toContain('expired');
    } finally {
      await otel.shutdown();
    }
  });
});
