/**
 * idempotentFetch with `propagate: propagateTraceContext` against a real node:http
 * server on loopback: every attempt carries the caller's active span as `traceparent`,
 * next to the same Idempotency-Key; without the option, no trace header is sent.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { context, propagation, trace } from '@opentelemetry/api';
import { idempotentFetch } from '../../../src/client/index.js';
import { propagateTraceContext } from '../../../src/otel/index.js';
import { otelHarness, type OtelHarness } from '../../helpers/otel.js';

let otel: OtelHarness;
let url: string;
const seen: IncomingHttpHeaders[] = [];
const server = createServer((req, res) => {
  seen.push(req.headers);
  req.resume();
  // The first attempt of each operation fails, so the retry's headers are seen too.
  const attempts = seen.filter((h) => h['idempotency-key'] === req.headers['idempotency-key']);
  res.writeHead(attempts.length === 1 ? 503 : 200, { 'content-type': 'application/json' });
  res.end('{}');
});

beforeAll(async () => {
  otel = otelHarness();
  propagation.setGlobalPropagator(otel.propagator);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`;
});
afterAll(async () => {
  propagation.disable();
  await new Promise((resolve) => server.close(resolve));
  await otel.shutdown();
});

describe('idempotentFetch trace propagation', () => {
  it('sends the active span as traceparent on every attempt', async () => {
    seen.length = 0;
    const span = otel.tracer('app').startSpan('checkout');
    await context.with(trace.setSpan(context.active(), span), () =>
      idempotentFetch(
        url,
        { method: 'POST' },
        {
          json: { amount: 1 },
          key: 'op-1',
          propagate: propagateTraceContext,
          backoff: { initialMs: 1, maxMs: 5 },
        },
      ),
    );
    span.end();
    const { traceId, spanId } = span.spanContext();
    expect(seen.map((h) => h['idempotency-key'])).toEqual(['op-1', 'op-1']);
    expect(seen.map((h) => h.traceparent)).toEqual([
      `00-${traceId}-${spanId}-01`,
      `00-${traceId}-${spanId}-01`,
    ]);
  });

  it('sends no trace header without the option', async () => {
    seen.length = 0;
    const span = otel.tracer('app').startSpan('checkout');
    await context.with(trace.setSpan(context.active(), span), () =>
      idempotentFetch(
        url,
        { method: 'POST' },
        { json: {}, key: 'op-2', backoff: { initialMs: 1, maxMs: 5 } },
      ),
    );
    span.end();
    expect(seen).toHaveLength(2);
    expect(seen.map((h) => h.traceparent)).toEqual([undefined, undefined]);
  });
});
