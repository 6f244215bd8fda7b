/**
 * otelIdempotencyTelemetry() on a real loopback server (each framework adapter): every
 * request gets a span continuing the caller's `traceparent`, with its key's hash, status
 * and outcome (executed, replayed, in-progress 409, refused, rolled-back, failed), the
 * handler runs inside it, and the requests counter counts each outcome.
 */
import { createHash, randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { IdempotencyTelemetry } from 'effectively-once/http';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { childrenOf, otelHarness, parentOf, type OtelHarness } from '../../helpers/otel.js';
import { gate, paymentFixture, post } from '../http/support.js';
import { HTTP_ATTR, HTTP_METRIC, otelIdempotencyTelemetry } from '../../../src/otel/index.js';

const fixture = paymentFixture('otel_http');
let otel: OtelHarness;
beforeEach(() => {
  otel = otelHarness();
});
afterEach(async () => otel.shutdown());

describe.each(FRAMEWORKS)('%s: OpenTelemetry on idempotent endpoints', (framework) => {
  it('a span and a count per outcome: executed, replayed, 409, refused, rolled back, failed', async () => {
    const hold = gate();
    const entered = gate();
    const held = randomUUID();
    const server = await fixture.start({
      framework,
      idempotency: {
        concurrent: 'reject',
        telemetry: otelIdempotencyTelemetry({
          tracerProvider: otel.tracerProvider,
          meterProvider: otel.meterProvider,
          propagator: otel.propagator,
        }),
      },
      hooks: {
        beforeEffect: async (key) => {
          // The application's span: a child of the request's, since the handler runs in it.
          otel.tracer('payments-app').startSpan(`effect ${key}`).end();
          if (key === held) {
            entered.open();
            await hold.wait;
          }
        },
        fail: (key) =>
          key.startsWith('throw') ? 'throw' : key.startsWith('500') ? 500 : undefined,
      },
    });
    const url = `${server.url}/charges`;
    const body = { customerId: 'c', amountCents: 1 };
    const caller = otel.producer('checkout');
    const key = randomUUID();

    expect((await post(url, key, body, caller.headers)).status).toBe(201);
    expect((await post(url, key, body)).status).toBe(201); // replayed
    const original = post(url, held, body);
    await entered.wait; // the original holds the key now
    expect((await post(url, held, body)).status).toBe(409);
    hold.open();
    expect((await original).status).toBe(201);
    expect((await post(url, undefined, body)).status).toBe(400); // refused: no key
    expect((await post(url, `500-${randomUUID()}`, body)).status).toBe(500); // rolled back
    expect((await post(url, `throw-${randomUUID()}`, body)).status).toBe(500); // failed

    const spans = otel.spans().filter((s) => s.name.startsWith('POST'));
    const hashOf = (k: string) => createHash('sha256').update(k).digest('hex');
    const byKey = (k: string) =>
      spans
        .filter((s) => s.attributes[HTTP_ATTR.keyHash] === hashOf(k))
        .map((s) => s.attributes[HTTP_ATTR.outcome]);
    expect(byKey(key)).toEqual(['executed', 'replayed']);
    expect(byKey(held).sort()).toEqual(['executed', 'in-progress']);

    const first = spans.find((s) => s.attributes[HTTP_ATTR.keyHash] === hashOf(key))!;
    // The core's default route is the URL's path, no template: the method alone names
    // the span; Express and Fastify pass the route they matched.
    const template = framework === 'hono' ? undefined : '/charges';
    expect(first.name).toBe(template === undefined ? 'POST' : `POST ${template}`);
    expect(first.kind).toBe(SpanKind.SERVER);
    expect(first.spanContext().traceId).toBe(caller.span.spanContext().traceId);
    expect(parentOf(first)).toBe(caller.span.spanContext().spanId);
    expect(first.attributes).toMatchObject({
      [HTTP_ATTR.method]: 'POST',
      [HTTP_ATTR.status]: 201,
    });
    expect(first.attributes[HTTP_ATTR.route]).toBe(template);
    expect(childrenOf(otel.spans(), first).map((s) => s.name)).toEqual([`effect ${key}`]);

    const outcomeOf = (o: string) => spans.filter((s) => s.attributes[HTTP_ATTR.outcome] === o);
    expect(outcomeOf('refused').map((s) => s.attributes[HTTP_ATTR.status])).toEqual([400]);
    expect(outcomeOf('refused')[0]!.status.code).toBe(SpanStatusCode.UNSET);
    expect(outcomeOf('rolled-back')).toHaveLength(1);
    expect(outcomeOf('failed')).toHaveLength(1);
    for (const s of [...outcomeOf('rolled-back'), ...outcomeOf('failed')])
      expect(s.status.code).toBe(SpanStatusCode.ERROR);

    const counted = new Map<string, number>();
    for (const p of await otel.points(HTTP_METRIC.requests)) {
      const o = String(p.attributes[HTTP_ATTR.outcome]);
      counted.set(o, (counted.get(o) ?? 0) + (p.value as number));
    }
    expect(Object.fromEntries(counted)).toEqual({
      executed: 2,
      replayed: 1,
      'in-progress': 1,
      refused: 1,
      'rolled-back': 1,
      failed: 1,
    });
    const durations = await otel.points(HTTP_METRIC.duration);
    const total = durations.reduce((n, p) => n + (p.value as { count: number }).count, 0);
    expect(total).toBe(7);
  });

  it('a throwing telemetry hook costs the request nothing: it runs once and answers', async () => {
    const broken: IdempotencyTelemetry[] = [
      {
        startRequest: () => {
          throw new Error('telemetry down');
        },
      },
      {
        startRequest: () => ({
          run: () => {
            throw new Error('telemetry down');
          },
          identified: () => undefined,
          end: () => undefined,
        }),
      },
      {
        startRequest: (request) => ({
          run: (fn) => fn(),
          identified: () => {
            throw new Error(`telemetry down for ${request.method}`);
          },
          end: () => {
            throw new Error('telemetry down');
          },
        }),
      },
    ];
    for (const telemetry of broken) {
      const server = await fixture.start({ framework, idempotency: { telemetry } });
      const key = randomUUID();
      const sent = await post(`${server.url}/charges`, key, { customerId: 'c', amountCents: 1 });
      expect(sent.status).toBe(201);
      expect(await fixture.effects(key)).toBe(1);
    }
  });
});
