import { createHash } from 'node:crypto';
import {
  context as contextApi,
  metrics as metricsApi,
  propagation as propagationApi,
  SpanKind,
  SpanStatusCode,
  trace as traceApi,
  ValueType,
  type Attributes,
  type MeterProvider,
  type TextMapPropagator,
  type TracerProvider,
} from '@opentelemetry/api';
import type {
  HttpRequestEnd,
  HttpRequestIdentity,
  HttpRequestScope,
  IdempotencyTelemetry,
} from '../http/telemetry.js';
import { ATTR } from './attributes.js';
import { SECONDS } from './metrics.js';
import { INSTRUMENTATION_NAME } from './telemetry.js';

/** Names of the HTTP side's instruments. */
export const HTTP_METRIC = {
  /** Counter: requests answered, by `effectively_once.http.outcome` (replays and 409s show here). */
  requests: 'effectively_once.http.requests',
  /** Histogram, seconds: from the request's arrival to its answer (the body may still stream). */
  duration: 'effectively_once.http.request.duration',
} as const;

/** Attribute names of the HTTP side (the HTTP semantic conventions' where one exists). */
export const HTTP_ATTR = {
  method: 'http.request.method',
  /** The route's template only (`/orders/:id`); absent when none is known. */
  route: 'http.route',
  status: 'http.response.status_code',
  outcome: 'effectively_once.http.outcome',
  /**
   * The idempotency key's sha256, hex: never the key itself, which a client may have
   * made from its own data and which, with the tenant, fetches the stored answer.
   */
  keyHash: `${ATTR.key}.sha256`,
} as const;

/** Options of {@link otelIdempotencyTelemetry}. */
export interface OtelIdempotencyTelemetryOptions {
  /** Where spans go. Default: the global tracer provider. */
  tracerProvider?: TracerProvider;
  /** Where metrics go. Default: the global meter provider. */
  meterProvider?: MeterProvider;
  /**
   * Reads the caller's trace context from the request's headers when no span is active
   * (no HTTP server instrumentation). Default: the global propagator.
   */
  propagator?: TextMapPropagator;
}

/**
 * OpenTelemetry for `createIdempotency({ ..., telemetry })`. Each request gets a span,
 * `<METHOD> <route template>` (the method alone when no template is known: the default
 * route is the URL's path, never used as a name): a `SERVER` span continuing the
 * caller's `traceparent` when no span is active, else an `INTERNAL` child of the active
 * one (your HTTP server instrumentation's). It carries `http.request.method`,
 * `http.route` (the template only), `effectively_once.key.sha256` (the key's hash,
 * never the key), `http.response.status_code` and `effectively_once.http.outcome`; the
 * handler runs with it active. Metrics: see {@link HTTP_METRIC}, by method, status and
 * outcome.
 */
export function otelIdempotencyTelemetry(
  options: OtelIdempotencyTelemetryOptions = {},
): IdempotencyTelemetry {
  const tracer = (options.tracerProvider ?? traceApi.getTracerProvider()).getTracer(
    INSTRUMENTATION_NAME,
  );
  const meter = (options.meterProvider ?? metricsApi.getMeterProvider()).getMeter(
    INSTRUMENTATION_NAME,
  );
  const propagator = options.propagator;
  const requests = meter.createCounter(HTTP_METRIC.requests, {
    description: 'Idempotent requests answered, by outcome',
    unit: '{request}',
    valueType: ValueType.INT,
  });
  const duration = meter.createHistogram(HTTP_METRIC.duration, {
    description: 'Duration of an idempotent request, from arrival to answer',
    unit: 's',
    advice: { explicitBucketBoundaries: SECONDS },
  });
  const getter = {
    keys: (carrier: Headers) => [...carrier.keys()],
    get: (carrier: Headers, key: string) => carrier.get(key) ?? undefined,
  };

  return {
    startRequest(request: Request): HttpRequestScope {
      const method = request.method.toUpperCase();
      const active = contextApi.active();
      const nested = traceApi.getSpan(active) !== undefined;
      const parent = nested
        ? active
        : propagator !== undefined
          ? propagator.extract(active, request.headers, getter)
          : propagationApi.extract(active, request.headers, getter);
      const span = tracer.startSpan(
        method,
        {
          kind: nested ? SpanKind.INTERNAL : SpanKind.SERVER,
          attributes: { [HTTP_ATTR.method]: method },
        },
        parent,
      );
      const ctx = traceApi.setSpan(parent, span);
      const started = performance.now();
      return {
        run: (fn) => contextApi.with(ctx, fn),
        identified({ key, template }: HttpRequestIdentity): void {
          // The semantic conventions' rule: a span is named by the route's template, or
          // by the method alone; a raw path (ids, account numbers) would be unbounded.
          if (template !== undefined) {
            span.updateName(`${method} ${template}`);
            span.setAttribute(HTTP_ATTR.route, template);
          }
          if (key !== undefined)
            span.setAttribute(HTTP_ATTR.keyHash, createHash('sha256').update(key).digest('hex'));
        },
        end({ outcome, status, error }: HttpRequestEnd): void {
          span.setAttribute(HTTP_ATTR.status, status);
          span.setAttribute(HTTP_ATTR.outcome, outcome);
          // Server spans: a 4xx is the client's doing, not an error of this service.
          if (outcome === 'failed' || status >= 500) {
            if (error !== undefined) {
              const thrown: unknown = error;
              const err = thrown instanceof Error ? thrown : new Error(String(thrown));
              span.recordException(err);
              span.setAttribute('error.type', err.name);
            } else span.setAttribute('error.type', `${status}`);
            span.setStatus({ code: SpanStatusCode.ERROR });
          }
          span.end();
          const attributes: Attributes = {
            [HTTP_ATTR.method]: method,
            [HTTP_ATTR.status]: status,
            [HTTP_ATTR.outcome]: outcome,
          };
          requests.add(1, attributes);
          duration.record((performance.now() - started) / 1000, attributes);
        },
      };
    },
  };
}
