import {
  context,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  trace,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type DataPoint,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { otelTelemetry } from '../../src/otel/index.js';
import type { ConsumerTelemetry } from '../../src/index.js';

/**
 * The official SDK wired to in-memory exporters, for asserting what `otelTelemetry()`
 * produced: finished spans, and metric points read on demand.
 */
export interface OtelHarness {
  telemetry: ConsumerTelemetry;
  /** The SDK's providers, for the relay's and the HTTP side's telemetry. */
  tracerProvider: BasicTracerProvider;
  meterProvider: MeterProvider;
  /** The W3C propagator the telemetry reads `traceparent` with. */
  propagator: W3CTraceContextPropagator;
  spans(): ReadableSpan[];
  /** A tracer of the same provider, for the application's own spans. */
  tracer(name: string): Tracer;
  /** Collects the metrics now; returns the points of the instrument `name`. */
  points(name: string): Promise<Array<DataPoint<unknown>>>;
  /** A producer span (ended) and the message headers that carry its context. */
  producer(name?: string): { span: Span; headers: Record<string, string> };
  shutdown(): Promise<void>;
}

let contextManager: AsyncLocalStorageContextManager | undefined;

/** Enables async context propagation once per test file (the handler's spans nest through it). */
function ensureContextManager(): void {
  if (contextManager !== undefined) return;
  contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
}

export function otelHarness(): OtelHarness {
  ensureContextManager();
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spanExporter)],
  });
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exports only when the test asks (forceFlush): the interval never fires in a test's time.
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 3_600_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const propagator = new W3CTraceContextPropagator();
  const tracer = tracerProvider.getTracer('producer');
  return {
    telemetry: otelTelemetry({ tracerProvider, meterProvider, propagator }),
    tracerProvider,
    meterProvider,
    propagator,
    spans: () => spanExporter.getFinishedSpans(),
    tracer: (name) => tracerProvider.getTracer(name),
    points: async (name) => {
      metricExporter.reset();
      await reader.forceFlush();
      const batches = metricExporter.getMetrics();
      const last = batches[batches.length - 1];
      const metric = last?.scopeMetrics
        .flatMap((s) => s.metrics)
        .find((m) => m.descriptor.name === name);
      return metric?.dataPoints ?? [];
    },
    producer: (name = 'send orders') => {
      const span = tracer.startSpan(name);
      span.end();
      const headers: Record<string, string> = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), headers, defaultTextMapSetter);
      return { span, headers };
    },
    shutdown: async () => {
      await tracerProvider.shutdown();
      await meterProvider.shutdown();
    },
  };
}

/** The parent's span id of a finished span, if it has one. */
export function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}

/** The spans named `name`. */
export function named(spans: ReadableSpan[], name: string): ReadableSpan[] {
  return spans.filter((s) => s.name === name);
}

/** The children of `parent` among `spans`. */
export function childrenOf(spans: ReadableSpan[], parent: { spanContext(): SpanContext }) {
  const id = parent.spanContext().spanId;
  return spans.filter((s) => parentOf(s) === id);
}
