/**
 * otelRelayTelemetry() and otelIdempotencyTelemetry() without a database: a row that
 * carries a trace is sent with its publish span's `traceparent` (replacing the recorded
 * one whatever its case), a row without one is sent unchanged, a refused row's span is
 * an error; a request with no active span continues the caller's `traceparent`.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { PublishError, type OutboxRecord } from '../../../src/outbox/index.js';
import {
  otelIdempotencyTelemetry,
  otelRelayTelemetry,
  outboxTraceHeaders,
} from '../../../src/otel/index.js';

context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
const propagator = new W3CTraceContextPropagator();

function sdk() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  return { exporter, tracerProvider };
}

function record(id: string, headers: Record<string, string>): OutboxRecord {
  return {
    id,
    destination: 'orders',
    orderingKey: null,
    payload: Buffer.from('{}'),
    contentType: 'application/json',
    headers,
    attempts: 1,
    createdAt: new Date(),
  };
}

describe('otelRelayTelemetry', () => {
  it('sends the publish span as the traced row’s parent, leaves an untraced row alone', () => {
    const { exporter, tracerProvider } = sdk();
    const enqueuing = tracerProvider.getTracer('app').startSpan('place order');
    const recorded = context.with(trace.setSpan(ROOT_CONTEXT, enqueuing), () =>
      outboxTraceHeaders(propagator),
    );
    enqueuing.end();
    expect(recorded.traceparent).toContain(enqueuing.spanContext().traceId);
    // Recorded under another case: replaced, not sent twice.
    const traced = record('a', { Traceparent: recorded.traceparent!, 'x-tenant': 't1' });
    const untraced = record('b', { 'x-tenant': 't2' });
    const telemetry = otelRelayTelemetry({ tracerProvider, propagator });
    const scope = telemetry.startPublish('orders', [traced, untraced]);
    scope.end(new Map([['b', new PublishError('orders', 'refused')]]));

    const [publishA, publishB] = exporter
      .getFinishedSpans()
      .filter((s) => s.name !== 'place order');
    expect(publishA!.name).toBe('publish orders');
    expect(publishA!.kind).toBe(SpanKind.PRODUCER);
    expect(publishA!.parentSpanContext?.spanId).toBe(enqueuing.spanContext().spanId);
    const sent = scope.records[0]!.headers;
    expect(Object.keys(sent).sort()).toEqual(['traceparent', 'x-tenant']);
    expect(sent.traceparent).toContain(publishA!.spanContext().spanId);
    expect(scope.records[1]).toBe(untraced);
    expect(publishA!.status.code).toBe(SpanStatusCode.UNSET);
    expect(publishB!.status.code).toBe(SpanStatusCode.ERROR);
    expect(publishB!.attributes['error.type']).toBe('EO_OUTBOX_PUBLISH');
  });

  it('outboxTraceHeaders() is empty outside a span', () => {
    expect(outboxTraceHeaders(propagator)).toEqual({});
  });
});

describe('otelIdempotencyTelemetry', () => {
  it('continues the caller’s traceparent when no span is active, nests under one that is', () => {
    const { exporter, tracerProvider } = sdk();
    const caller = tracerProvider.getTracer('client').startSpan('checkout');
    const headers: Record<string, string> = {};
    propagator.inject(trace.setSpan(ROOT_CONTEXT, caller), headers, {
      set: (c: Record<string, string>, k: string, v: string) => (c[k] = v),
    });
    caller.end();
    const telemetry = otelIdempotencyTelemetry({ tracerProvider, propagator });
    const request = new Request('http://localhost/orders', { method: 'POST', headers });
    const scope = telemetry.startRequest(request);
    scope.identified({ key: 'k1', route: '/orders/42', template: '/orders/:id' });
    scope.end({ outcome: 'replayed', status: 201 });

    const server = tracerProvider.getTracer('http').startSpan('POST');
    const nested = context.with(trace.setSpan(ROOT_CONTEXT, server), () =>
      telemetry.startRequest(new Request('http://localhost/orders', { method: 'POST' })),
    );
    nested.end({ outcome: 'failed', status: 503 });
    server.end();

    const [first, second] = exporter
      .getFinishedSpans()
      .filter((s) => s.instrumentationScope.name === 'effectively-once');
    expect(first!.name).toBe('POST /orders/:id');
    expect(first!.kind).toBe(SpanKind.SERVER);
    expect(first!.parentSpanContext?.spanId).toBe(caller.spanContext().spanId);
    expect(first!.attributes).toMatchObject({
      'http.route': '/orders/:id',
      'effectively_once.key.sha256': createHash('sha256').update('k1').digest('hex'),
      'effectively_once.http.outcome': 'replayed',
      'http.response.status_code': 201,
    });
    expect(second!.kind).toBe(SpanKind.INTERNAL);
    expect(second!.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
    expect(second!.status.code).toBe(SpanStatusCode.ERROR);
  });
});
