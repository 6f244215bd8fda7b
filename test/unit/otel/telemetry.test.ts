/**
 * The core's side of telemetry without a database: a throwing hook never changes a
 * delivery, steps report the failures the runners return, the option is validated,
 * and Kafka headers become a text carrier for the propagator.
 */
import { describe, expect, it } from '@jest/globals';
import { context, propagation, ROOT_CONTEXT, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import pg from 'pg';
import { headerText } from '../../../adapters/kafka/record-delivery.js';
import {
  ConfigurationError,
  createConsumer,
  HandlerError,
  type ConsumerTelemetry,
  type Delivery,
  type TelemetryScope,
} from '../../../src/index.js';
import { propagateTraceContext } from '../../../src/otel/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { Tracing } from '../../../src/consumer/tracing.js';

const delivery = { key: 'k', attempt: 1 } as Delivery<unknown>;

function text(error: unknown): string {
  return error instanceof Error ? error.toString() : typeof error === 'string' ? error : 'other';
}

/** A telemetry that records what the core told it. */
function recorder(): { telemetry: ConsumerTelemetry; log: string[] } {
  const log: string[] = [];
  const scope: TelemetryScope = {
    step: (name) => {
      log.push(`start ${name}`);
      return {
        run: (fn) => fn(),
        end: (error) =>
          log.push(`end ${name}${error === undefined ? '' : ` failed: ${text(error)}`}`),
      };
    },
    settled: (_d, outcome, error) => log.push(`settled ${outcome}${error ? ` ${error.code}` : ''}`),
    end: () => log.push('end'),
  };
  return {
    log,
    telemetry: { startDelivery: () => scope, startBatch: () => scope },
  };
}

describe('Tracing', () => {
  it('passes straight through without telemetry', async () => {
    const tracing = new Tracing(undefined, 'c');
    await expect(tracing.delivery(delivery, async () => 'processed')).resolves.toBe('processed');
    await expect(tracing.step(delivery, 'claim', async () => 42)).resolves.toBe(42);
  });

  it('reports steps, the failure a step returns, the noted error and the outcome, in order', async () => {
    const { telemetry, log } = recorder();
    const tracing = new Tracing(telemetry, 'c');
    const outcome = await tracing.delivery(delivery, async () => {
      await tracing.step(delivery, 'claim', async () => undefined);
      await tracing.step(
        delivery,
        'handler',
        async () => ({ kind: 'threw' as const }),
        (r) => (r.kind === 'threw' ? 'boom' : undefined),
      );
      tracing.failed(delivery, new HandlerError('k', 1, new Error('boom')));
      return 'retry';
    });
    expect(outcome).toBe('retry');
    expect(log).toEqual([
      'start claim',
      'end claim',
      'start handler',
      'end handler failed: boom',
      'settled retry EO_HANDLER',
      'end',
    ]);
  });

  it('reports a mismatch as its own outcome', async () => {
    const { telemetry, log } = recorder();
    const tracing = new Tracing(telemetry, 'c');
    await tracing.delivery(delivery, async () => {
      tracing.mismatch(delivery, new HandlerError('k', 1, 'x'));
      return 'dead-lettered';
    });
    expect(log).toContain('settled mismatch EO_HANDLER');
  });

  it('ignores hooks that throw: the work runs and its result is returned', async () => {
    const throwing: ConsumerTelemetry = {
      startDelivery: () => ({
        step: () => {
          throw new Error('broken step');
        },
        settled: () => {
          throw new Error('broken settled');
        },
        end: () => {
          throw new Error('broken end');
        },
      }),
      startBatch: () => {
        throw new Error('broken batch');
      },
    };
    const tracing = new Tracing(throwing, 'c');
    const ran: string[] = [];
    const outcome = await tracing.delivery(delivery, async () => {
      ran.push(await tracing.step(delivery, 'handler', async () => 'handler ran'));
      return 'processed';
    });
    expect(outcome).toBe('processed');
    expect(ran).toEqual(['handler ran']);
    await expect(tracing.batch([delivery], async () => ['duplicate'])).resolves.toEqual([
      'duplicate',
    ]);
  });

  it('rethrows what the work throws, after ending the step with it', async () => {
    const { telemetry, log } = recorder();
    const tracing = new Tracing(telemetry, 'c');
    await tracing.delivery(delivery, async () => {
      await expect(
        tracing.step(delivery, 'claim', async () => {
          throw new Error('lock timeout');
        }),
      ).rejects.toThrow('lock timeout');
      return 'retry';
    });
    expect(log[1]).toBe('end claim failed: Error: lock timeout');
  });
});

describe('the telemetry option', () => {
  it('must be a ConsumerTelemetry', () => {
    const make = (telemetry: unknown) =>
      createConsumer({
        name: 'c',
        pool: new pg.Pool(),
        source: memorySource(),
        handler: async () => undefined,
        telemetry: telemetry as ConsumerTelemetry,
      });
    expect(() => make({})).toThrow(ConfigurationError);
    expect(() => make({ startDelivery: () => undefined })).toThrow('"telemetry"');
  });
});

describe('trace context carriers', () => {
  it('reads Kafka headers as text: bytes decoded, the first of a repeated header', () => {
    expect(
      headerText({
        traceparent: Buffer.from('00-abc-def-01'),
        tracestate: ['k=v', 'k=w'],
        empty: undefined,
        text: 'plain',
      }),
    ).toEqual({ traceparent: '00-abc-def-01', tracestate: 'k=v', text: 'plain' });
  });

  it('propagateTraceContext writes the active span as traceparent, nothing without one', () => {
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    try {
      const spanContext = {
        traceId: '0af7651916cd43dd8448eb211c80319c',
        spanId: 'b7ad6b7169203331',
        traceFlags: 1,
      };
      const active = trace.setSpanContext(ROOT_CONTEXT, spanContext);
      const headers = new Headers();
      context.with(active, () => propagateTraceContext(headers));
      expect(headers.get('traceparent')).toBe(
        '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      );
      const none = new Headers();
      propagateTraceContext(none);
      expect(none.get('traceparent')).toBeNull();
    } finally {
      propagation.disable();
      context.disable();
    }
  });
});
