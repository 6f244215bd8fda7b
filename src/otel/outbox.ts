import {
  context as contextApi,
  isSpanContextValid,
  metrics as metricsApi,
  propagation as propagationApi,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace as traceApi,
  ValueType,
  type Context,
  type MeterProvider,
  type Span,
  type TextMapPropagator,
  type TracerProvider,
} from '@opentelemetry/api';
import type { OutboxRecord } from '../outbox/record.js';
import type { Relay } from '../outbox/relay-types.js';
import type { RelayPublishScope, RelayTelemetry } from '../outbox/telemetry.js';
import { ATTR } from './attributes.js';
import { carrierGetter } from './carrier.js';
import { SECONDS } from './metrics.js';
import { INSTRUMENTATION_NAME } from './telemetry.js';

/** Names of the relay's instruments. */
export const OUTBOX_METRIC = {
  /** Counter: rows marked published, by `messaging.destination.name`. */
  published: 'effectively_once.outbox.published',
  /** Counter: failed publish attempts (retried later or parked), by destination. */
  failed: 'effectively_once.outbox.failed',
  /** Counter: rows given up on (parked), by destination. */
  parked: 'effectively_once.outbox.parked',
  /** Gauge, seconds: age of the oldest unpublished row, every `lagIntervalMs`. */
  lag: 'effectively_once.outbox.lag',
  /** Gauge: rows not yet published, every `lagIntervalMs`. */
  pending: 'effectively_once.outbox.pending',
  /** Histogram, seconds: one claimed batch, from the claim to the last mark. */
  batchDuration: 'effectively_once.outbox.batch.duration',
} as const;

/** Options of {@link otelRelayTelemetry}. */
export interface OtelRelayTelemetryOptions {
  /** Where spans go. Default: the global tracer provider. */
  tracerProvider?: TracerProvider;
  /** Where metrics go. Default: the global meter provider. */
  meterProvider?: MeterProvider;
  /**
   * Reads the enqueuing trace from a row's headers and writes the publish span into
   * what is sent. Default: the global propagator (W3C `traceparent` once an SDK
   * registered it).
   */
  propagator?: TextMapPropagator;
}

/** Replaces a header whatever its case, so a row's `Traceparent` is not sent twice. */
const replacingSetter = {
  set: (carrier: Record<string, string>, key: string, value: string) => {
    for (const name of Object.keys(carrier))
      if (name.toLowerCase() === key.toLowerCase()) delete carrier[name];
    carrier[key] = value;
  },
};

const setter = {
  set: (carrier: Record<string, string>, key: string, value: string) => {
    carrier[key] = value;
  },
};

/**
 * The trace context to store with an outbox row: spread it into `enqueue`'s `headers`
 * (`headers: { ...outboxTraceHeaders() }`) inside the traced code that enqueues. It
 * holds the active context's W3C `traceparent` (and `tracestate`), or nothing when no
 * span is active. The publishers send a row's headers along, so the relay's publish
 * span and the consumer's delivery span join the enqueuing trace.
 */
export function outboxTraceHeaders(propagator?: TextMapPropagator): Record<string, string> {
  const headers: Record<string, string> = {};
  if (propagator !== undefined) propagator.inject(contextApi.active(), headers, setter);
  else propagationApi.inject(contextApi.active(), headers, setter);
  return headers;
}

/**
 * OpenTelemetry for an outbox relay: pass it as `createRelay({ ..., telemetry })`. Each
 * row handed to a publisher gets a producer span `publish <destination>`, child of the
 * trace recorded with the row (see {@link outboxTraceHeaders}); the span's context
 * replaces the row's `traceparent` in what is sent, so the consumer's span is the
 * publish span's child. Metrics: see {@link OUTBOX_METRIC}. One instance may serve
 * several relays.
 */
export function otelRelayTelemetry(options: OtelRelayTelemetryOptions = {}): RelayTelemetry {
  const tracer = (options.tracerProvider ?? traceApi.getTracerProvider()).getTracer(
    INSTRUMENTATION_NAME,
  );
  const meter = (options.meterProvider ?? metricsApi.getMeterProvider()).getMeter(
    INSTRUMENTATION_NAME,
  );
  const propagator = options.propagator;
  const counter = (name: string, description: string) =>
    meter.createCounter(name, { description, unit: '{row}', valueType: ValueType.INT });
  const published = counter(OUTBOX_METRIC.published, 'Outbox rows published and marked');
  const failed = counter(OUTBOX_METRIC.failed, 'Failed outbox publish attempts');
  const parked = counter(OUTBOX_METRIC.parked, 'Outbox rows given up on (parked)');
  const lag = meter.createGauge(OUTBOX_METRIC.lag, {
    description: 'Age of the oldest unpublished outbox row',
    unit: 's',
  });
  const pending = meter.createGauge(OUTBOX_METRIC.pending, {
    description: 'Outbox rows not yet published',
    unit: '{row}',
    valueType: ValueType.INT,
  });
  const batchDuration = meter.createHistogram(OUTBOX_METRIC.batchDuration, {
    description: 'Duration of one relay batch, from the claim to the last mark',
    unit: 's',
    advice: { explicitBucketBoundaries: SECONDS },
  });

  const extract = (headers: Readonly<Record<string, string>>): Context | undefined => {
    const ctx =
      propagator !== undefined
        ? propagator.extract(ROOT_CONTEXT, headers, carrierGetter)
        : propagationApi.extract(ROOT_CONTEXT, headers, carrierGetter);
    const spanContext = traceApi.getSpanContext(ctx);
    return spanContext !== undefined && isSpanContextValid(spanContext) ? ctx : undefined;
  };
  const inject = (ctx: Context, headers: Record<string, string>): void => {
    if (propagator !== undefined) propagator.inject(ctx, headers, replacingSetter);
    else propagationApi.inject(ctx, headers, replacingSetter);
  };

  return {
    attach(relay: Relay): void {
      const dest = (destination: string) => ({ [ATTR.destination]: destination });
      relay.on('published', (e) => published.add(1, dest(e.destination)));
      relay.on('failed', (e) => failed.add(1, dest(e.destination)));
      relay.on('parked', (e) => {
        // A parked row's last attempt failed too (the relay counts it in `failed`).
        failed.add(1, dest(e.destination));
        parked.add(1, dest(e.destination));
      });
      relay.on('batch', (e) => batchDuration.record(e.latencyMs / 1000));
      relay.on('lag', (stats) => {
        lag.record(stats.oldestPendingAgeMs / 1000);
        pending.record(stats.pending);
      });
    },

    startPublish(destination: string, records: readonly OutboxRecord[]): RelayPublishScope {
      const spans = new Map<string, Span>();
      const sent = records.map((record) => {
        const recorded = extract(record.headers);
        const span = tracer.startSpan(
          `publish ${destination}`,
          {
            kind: SpanKind.PRODUCER,
            attributes: {
              [ATTR.destination]: destination,
              [ATTR.operationType]: 'send',
              [ATTR.operationName]: 'publish',
              [ATTR.messageId]: record.id,
              [ATTR.attempt]: record.attempts,
              ...(record.orderingKey !== null
                ? { 'effectively_once.outbox.ordering_key': record.orderingKey }
                : {}),
            },
          },
          recorded ?? contextApi.active(),
        );
        spans.set(record.id, span);
        // Only a row that carries a trace gets the publish span's instead: adding headers
        // to one that has none could push it past a broker's limit (SQS: 10 attributes).
        if (recorded === undefined) return record;
        const headers: Record<string, string> = { ...record.headers };
        inject(traceApi.setSpan(recorded, span), headers);
        return { ...record, headers };
      });
      return {
        records: sent,
        end(failures: ReadonlyMap<string, unknown>): void {
          for (const [id, span] of spans) {
            if (failures.has(id)) {
              const error = failures.get(id);
              const err = error instanceof Error ? error : new Error(String(error));
              span.recordException(err);
              const code = (err as { code?: unknown }).code;
              span.setAttribute('error.type', typeof code === 'string' ? code : err.name);
              span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
            }
            span.end();
          }
        },
      };
    },
  };
}
