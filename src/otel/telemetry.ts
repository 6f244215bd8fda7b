import {
  context as contextApi,
  isSpanContextValid,
  metrics as metricsApi,
  propagation as propagationApi,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace as traceApi,
  type Attributes,
  type Context,
  type Link,
  type MeterProvider,
  type Span,
  type TextMapPropagator,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type { Consumer } from '../consumer/types.js';
import type { EffectivelyOnceError } from '../errors.js';
import type {
  ConsumerTelemetry,
  TelemetryOutcome,
  TelemetryScope,
  TelemetryStep,
  TelemetryStepScope,
} from '../consumer/telemetry.js';
import type { Delivery, MessagingInfo } from '../types.js';
import { ATTR, consumerAttributes, messageAttributes, messagingOf } from './attributes.js';
import { carrierGetter } from './carrier.js';
import { Metrics } from './metrics.js';

/** Options of {@link otelTelemetry}. */
export interface OtelTelemetryOptions {
  /** Where spans go. Default: the global tracer provider (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider;
  /** Where metrics go. Default: the global meter provider (`metrics.getMeterProvider()`). */
  meterProvider?: MeterProvider;
  /**
   * Reads the producer's trace context from a message's headers or attributes. Default:
   * the global propagator (`propagation`), W3C `traceparent` once an SDK registered it.
   */
  propagator?: TextMapPropagator;
}

/** The instrumentation scope's name: the package. */
export const INSTRUMENTATION_NAME = 'effectively-once';

/**
 * OpenTelemetry for a consumer: pass it as `createConsumer({ ..., telemetry })`. Each
 * delivery becomes a consumer span `process <destination>` (in batch mode, one per
 * batch, linked to each message's producer), child of the producer's span when the
 * message carries a `traceparent`, with a `transaction` child span holding `claim`, `handler` and `commit`
 * spans and the outcome in `effectively_once.outcome`. Metrics: see {@link METRIC}.
 * One instance may serve several consumers. Call it once the SDK registered its providers:
 * a meter taken from the global provider before that stays a no-op.
 */
export function otelTelemetry(options: OtelTelemetryOptions = {}): ConsumerTelemetry {
  const tracer = (options.tracerProvider ?? traceApi.getTracerProvider()).getTracer(
    INSTRUMENTATION_NAME,
  );
  const meter = (options.meterProvider ?? metricsApi.getMeterProvider()).getMeter(
    INSTRUMENTATION_NAME,
  );
  return new OtelTelemetry(tracer, new Metrics(meter), options.propagator);
}

class OtelTelemetry implements ConsumerTelemetry {
  constructor(
    private readonly tracer: Tracer,
    private readonly metrics: Metrics,
    private readonly propagator: TextMapPropagator | undefined,
  ) {}

  attach(consumer: Consumer, name: string): void {
    this.metrics.attach(consumer, name);
  }

  startDelivery(delivery: Delivery<unknown>, consumer: string): TelemetryScope {
    const info = messagingOf(delivery);
    const common = consumerAttributes(consumer, info);
    const producer = this.producerContext(info);
    // The producer's span is the parent when there is one; else whatever is active.
    const parent = producer ?? contextApi.active();
    const span = this.tracer.startSpan(
      `process ${info.destination}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          ...common,
          ...messageAttributes(info),
          [ATTR.attempt]: delivery.attempt,
          ...(delivery.key !== undefined ? { [ATTR.key]: delivery.key } : {}),
        },
      },
      parent,
    );
    this.metrics.observeLag(info, common);
    return new Scope(this.tracer, this.metrics, span, parent, common);
  }

  startBatch(deliveries: ReadonlyArray<Delivery<unknown>>, consumer: string): TelemetryScope {
    const infos = deliveries.map((d) => messagingOf(d));
    const first = infos[0] ?? { system: 'unknown', destination: 'unknown', carrier: {} };
    const common = consumerAttributes(consumer, first);
    // A batch has many producers: each is a link, none the parent (messaging conventions).
    const links: Link[] = [];
    for (const info of infos) {
      const producer = this.producerContext(info);
      const spanContext = producer && traceApi.getSpanContext(producer);
      if (spanContext !== undefined)
        links.push({ context: spanContext, attributes: messageAttributes(info) });
    }
    const parent = contextApi.active();
    const span = this.tracer.startSpan(
      `process ${first.destination}`,
      {
        kind: SpanKind.CONSUMER,
        links,
        attributes: { ...common, [ATTR.batchCount]: deliveries.length },
      },
      parent,
    );
    for (const info of infos) this.metrics.observeLag(info, common);
    return new Scope(this.tracer, this.metrics, span, parent, common, true);
  }

  /** The producer's context from the message's carrier, when it holds a valid one. */
  private producerContext(info: MessagingInfo): Context | undefined {
    const carrier = info.carrier;
    const extracted =
      this.propagator !== undefined
        ? this.propagator.extract(ROOT_CONTEXT, carrier, carrierGetter)
        : propagationApi.extract(ROOT_CONTEXT, carrier, carrierGetter);
    const spanContext = traceApi.getSpanContext(extracted);
    return spanContext !== undefined && isSpanContextValid(spanContext) ? extracted : undefined;
  }
}

/** One delivery's (or batch's) span and its steps. */
class Scope implements TelemetryScope {
  private readonly context: Context;
  private readonly started = performance.now();
  /** The running transaction step: claim, handler and commit are its children. */
  private transaction: Context | undefined;
  private readonly counts = new Map<TelemetryOutcome, number>();
  private failure: EffectivelyOnceError | undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly metrics: Metrics,
    private readonly span: Span,
    parent: Context,
    private readonly common: Attributes,
    private readonly batch = false,
  ) {
    this.context = traceApi.setSpan(parent, span);
  }

  step(name: TelemetryStep): TelemetryStepScope {
    const parent = name === 'transaction' ? this.context : (this.transaction ?? this.context);
    const span = this.tracer.startSpan(name, { kind: SpanKind.INTERNAL }, parent);
    const ctx = traceApi.setSpan(parent, span);
    if (name === 'transaction') this.transaction = ctx;
    const started = performance.now();
    return {
      run: (fn) => contextApi.with(ctx, fn),
      end: (error) => {
        if (name === 'transaction') this.transaction = undefined;
        if (error !== undefined) fail(span, error);
        span.end();
        if (name === 'handler' || name === 'transaction')
          this.metrics.step(name, (performance.now() - started) / 1000, this.common);
      },
    };
  }

  settled(
    delivery: Delivery<unknown>,
    outcome: TelemetryOutcome,
    error: EffectivelyOnceError | undefined,
  ): void {
    this.metrics.settled(outcome, this.common);
    this.counts.set(outcome, (this.counts.get(outcome) ?? 0) + 1);
    if (isFailure(outcome)) this.failure ??= error;
    if (this.batch) {
      const info = messagingOf(delivery);
      this.span.addEvent('settled', {
        ...(info.messageId !== undefined ? { [ATTR.messageId]: info.messageId } : {}),
        ...(delivery.key !== undefined ? { [ATTR.key]: delivery.key } : {}),
        [ATTR.outcome]: outcome,
        ...(error !== undefined ? { 'error.type': error.code } : {}),
      });
    }
  }

  end(): void {
    const outcomes = [...this.counts.keys()];
    this.span.setAttribute(ATTR.outcome, outcomes.length === 1 ? outcomes[0]! : 'mixed');
    if (this.batch)
      for (const [outcome, count] of this.counts)
        this.span.setAttribute(`${ATTR.outcome}.${outcome}`, count);
    if (outcomes.some(isFailure)) {
      if (this.failure !== undefined) fail(this.span, this.failure);
      else this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
    this.metrics.processed((performance.now() - this.started) / 1000, this.common);
  }
}

/** Outcomes that mean the message was not handled as it should (the span's status is an error). */
function isFailure(outcome: TelemetryOutcome): boolean {
  return (
    outcome === 'retry' ||
    outcome === 'dead-lettered' ||
    outcome === 'mismatch' ||
    outcome === 'expired' ||
    outcome === 'unsettled'
  );
}

function fail(span: Span, error: unknown): void {
  const err = error instanceof Error ? error : new Error(String(error));
  span.recordException(err);
  const code = (err as { code?: unknown }).code;
  span.setAttribute('error.type', typeof code === 'string' ? code : err.name);
  span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
}
