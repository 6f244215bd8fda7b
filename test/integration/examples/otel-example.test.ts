/**
 * examples/otel-console.ts, run with in-memory exporters in place of the console ones:
 * the trace it documents (producer > process > transaction > claim / handler / commit,
 * the application's span in the handler) and the metrics it prints.
 */
import { describe, expect, it } from '@jest/globals';
import { AggregationTemporality, InMemoryMetricExporter } from '@opentelemetry/sdk-metrics';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { main } from '../../../examples/otel-console.js';
import { createExampleDatabase } from './support.js';

/** Keeps its spans through the example's `tracerProvider.shutdown()` (the SDK's exporter clears them). */
class KeepingSpanExporter extends InMemorySpanExporter {
  override shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

describe('examples/otel-console.ts', () => {
  it('exports the spans and metrics the observability docs show', async () => {
    const db = await createExampleDatabase('otel');
    const spanExporter = new KeepingSpanExporter();
    const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    try {
      await main({ env: { ...process.env, DATABASE_URL: db.url }, spanExporter, metricExporter });
    } finally {
      await db.drop();
    }
    const spans = spanExporter.getFinishedSpans();
    const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
    const ancestors = (span: ReadableSpan): ReadableSpan[] => {
      const parent = span.parentSpanContext && byId.get(span.parentSpanContext.spanId);
      return parent ? [...ancestors(parent), parent] : [];
    };
    const path = (span: ReadableSpan): string[] => [...ancestors(span), span].map((a) => a.name);
    // p-1's span: p-2's handler records too (twice), and its first attempt, which
    // throws before any SQL, may end first.
    const recordedP1 = spans.filter(
      (s) =>
        s.name === 'record payment' &&
        ancestors(s).some((a) => a.attributes['effectively_once.key'] === 'p-1'),
    );
    expect(recordedP1).toHaveLength(1);
    expect(path(recordedP1[0]!)).toEqual([
      'send payment',
      'process memory',
      'transaction',
      'handler',
      'record payment',
    ]);
    const outcomes = spans
      .filter((s) => s.name === 'process memory')
      .map(
        (s) =>
          `${String(s.attributes['effectively_once.key'])}:${String(s.attributes['effectively_once.outcome'])}`,
      )
      .sort();
    expect(outcomes).toEqual(['p-1:duplicate', 'p-1:processed', 'p-2:processed', 'p-2:retry']);
    const names = metricExporter
      .getMetrics()
      .flatMap((m) => m.scopeMetrics.flatMap((s) => s.metrics.map((x) => x.descriptor.name)));
    expect(new Set(names)).toEqual(
      new Set([
        'effectively_once.deliveries',
        'messaging.process.duration',
        'effectively_once.handler.duration',
        'effectively_once.transaction.duration',
      ]),
    );
  });
});
