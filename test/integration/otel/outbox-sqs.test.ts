/**
 * The outbox trace through SQS: a row enqueued inside a traced transaction is published
 * by the relay with its publish span's `traceparent` as a message attribute, and the
 * sqsSource consumer's delivery span continues that trace.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { context, SpanKind, trace } from '@opentelemetry/api';
import { createRelay, enqueue, migrateOutbox } from 'effectively-once/outbox';
import { sqsPublisher } from 'effectively-once/sqs';
import { ATTR, otelRelayTelemetry, outboxTraceHeaders } from '../../../src/otel/index.js';
import { named, otelHarness, parentOf, type OtelHarness } from '../../helpers/otel.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, recordEffect, sqsIntegration } from '../sqs/harness.js';

const it_ = sqsIntegration('otel_outbox');
let otel: OtelHarness;
beforeEach(() => {
  otel = otelHarness();
});
afterEach(async () => otel.shutdown());

describe('OpenTelemetry on the outbox through SQS', () => {
  it(
    'enqueue → relay → SQS → sqsSource is one trace',
    async () => {
      const { db, queues } = it_;
      const { url } = await queues.create('otel-outbox');
      await migrateOutbox(db.pool, { schema: db.schema });
      const enqueuing = otel.tracer('orders-app').startSpan('place order');
      const id = await context.with(trace.setSpan(context.active(), enqueuing), async () => {
        const client = await db.pool.connect();
        try {
          await client.query('BEGIN');
          const enqueued = await enqueue(
            client,
            {
              destination: 'orders',
              payload: { id: 'o-1' },
              headers: { ...outboxTraceHeaders(otel.propagator) },
            },
            { schema: db.schema },
          );
          await client.query('COMMIT');
          return enqueued;
        } finally {
          client.release();
        }
      });
      enqueuing.end();
      const relay = createRelay({
        pool: db.pool,
        schema: db.schema,
        publishers: { orders: sqsPublisher({ client: queues.client, queueUrl: url }) },
        telemetry: otelRelayTelemetry({
          tracerProvider: otel.tracerProvider,
          meterProvider: otel.meterProvider,
          propagator: otel.propagator,
        }),
      });
      await relay.start();
      try {
        await waitFor(() => relay.stats().published === 1, { what: 'the row published' });
      } finally {
        await relay.stop();
      }
      const consumer = await it_.worker(
        { queueUrl: url },
        {
          telemetry: otel.telemetry,
          handler: async (job: { id: string }, ctx) => {
            await recordEffect(ctx.tx, job.id, ctx.key, ctx.attempt, null);
          },
        },
      );
      // The delivery span ends at settlement (the delete), after `processed` counts it.
      await waitFor(() => otel.spans().some((s) => s.kind === SpanKind.CONSUMER), {
        what: 'the delivery span',
      });
      expect(consumer.stats().processed).toBe(1);

      const spans = otel.spans();
      const [publish] = named(spans, 'publish orders');
      expect(publish!.kind).toBe(SpanKind.PRODUCER);
      expect(publish!.attributes[ATTR.messageId]).toBe(id);
      expect(parentOf(publish!)).toBe(enqueuing.spanContext().spanId);
      const delivery = spans.find(
        (s) => s.kind === SpanKind.CONSUMER && s.attributes[ATTR.key] === id,
      );
      expect(delivery?.spanContext().traceId).toBe(enqueuing.spanContext().traceId);
      expect(parentOf(delivery!)).toBe(publish!.spanContext().spanId);
    },
    TIMEOUT,
  );
});
