/**
 * otelRelayTelemetry() and outboxTraceHeaders() against Postgres and the real Kafka
 * broker: a row enqueued inside a traced transaction is published under a producer
 * span of that trace, and the consumer's delivery span continues it (enqueue → relay →
 * Kafka → kafkaSource, one trace); the relay's counters, lag and batch duration are
 * exported as metrics.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Kafka } from 'kafkajs';
import {
  createRelay,
  enqueue,
  migrateOutbox,
  PublishError,
  type Publisher,
  type RelayTelemetry,
} from 'effectively-once/outbox';
import { kafkaPublisher } from 'effectively-once/kafka';
import {
  ATTR,
  OUTBOX_METRIC,
  otelRelayTelemetry,
  outboxTraceHeaders,
} from '../../../src/otel/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { named, otelHarness, parentOf, type OtelHarness } from '../../helpers/otel.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  createTopics,
  effects,
  kafkaTestEnv,
  startConsumer,
  unique,
} from '../kafka/kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
let otel: OtelHarness;
kafkaTestEnv('otel_outbox', (env) => ({ db, kafka } = env));
beforeEach(() => {
  otel = otelHarness();
});
afterEach(async () => otel.shutdown());

/** Enqueues `payload` in a committed transaction run inside the span `name`; returns the id and span. */
async function enqueueTraced(name: string, payload: unknown, destination = 'events') {
  const span = otel.tracer('orders-app').startSpan(name);
  const id = await context.with(trace.setSpan(context.active(), span), async () => {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const enqueued = await enqueue(
        client,
        { destination, payload, headers: { ...outboxTraceHeaders(otel.propagator) } },
        { schema: db.schema },
      );
      await client.query('COMMIT');
      return enqueued;
    } finally {
      client.release();
    }
  });
  span.end();
  return { id, span };
}

function telemetry() {
  return otelRelayTelemetry({
    tracerProvider: otel.tracerProvider,
    meterProvider: otel.meterProvider,
    propagator: otel.propagator,
  });
}

describe('OpenTelemetry on the outbox', () => {
  it('one trace from the enqueuing transaction through the relay to the Kafka consumer', async () => {
    const topic = unique('otel-outbox');
    const groupId = unique('g-otel-outbox');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    await migrateOutbox(db.pool, { schema: db.schema });
    const { id, span: enqueuing } = await enqueueTraced('place order', { seq: 0 });
    // A row enqueued outside any trace still gets a publish span, of a trace of its own.
    const untraced = await enqueue(
      db.pool,
      { destination: 'events', payload: { seq: 1 } },
      { schema: db.schema },
    );
    const publisher = kafkaPublisher({ kafka, topic });
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { events: publisher },
      telemetry: telemetry(),
      lagIntervalMs: 100,
    });
    await relay.start();
    try {
      await waitFor(() => relay.stats().published === 2, { what: 'both rows published' });
    } finally {
      await relay.stop();
      await publisher.close();
    }
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      consumer: { telemetry: otel.telemetry },
    });
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 2, {
        timeoutMs: 30_000,
        what: 'both records consumed',
      });
    } finally {
      await running.stop();
    }
    expect((await effects(db)).map((e) => e.key).sort()).toEqual([id, untraced].sort());

    const spans = otel.spans();
    const traceId = enqueuing.spanContext().traceId;
    const publishes = named(spans, 'publish events');
    expect(publishes).toHaveLength(2);
    const publish = publishes.find((s) => s.attributes[ATTR.messageId] === id)!;
    expect(publish.kind).toBe(SpanKind.PRODUCER);
    expect(publish.spanContext().traceId).toBe(traceId);
    expect(parentOf(publish)).toBe(enqueuing.spanContext().spanId);
    expect(publish.attributes[ATTR.destination]).toBe('events');
    expect(publish.attributes[ATTR.attempt]).toBe(1);
    const other = publishes.find((s) => s.attributes[ATTR.messageId] === untraced)!;
    expect(other.spanContext().traceId).not.toBe(traceId);

    // The consumer's delivery span is the publish span's child: the same trace.
    const deliveries = named(spans, `process ${topic}`);
    expect(deliveries).toHaveLength(2);
    const delivery = deliveries.find((s) => s.attributes[ATTR.key] === id)!;
    expect(delivery.spanContext().traceId).toBe(traceId);
    expect(parentOf(delivery)).toBe(publish.spanContext().spanId);
    const untracedDelivery = deliveries.find((s) => s.attributes[ATTR.key] === untraced)!;
    expect(untracedDelivery.spanContext().traceId).not.toBe(traceId);

    const published = await otel.points(OUTBOX_METRIC.published);
    expect(published.map((p) => [p.attributes[ATTR.destination], p.value])).toEqual([
      ['events', 2],
    ]);
    const batches = await otel.points(OUTBOX_METRIC.batchDuration);
    expect(batches.length).toBe(1);
    expect((batches[0]!.value as { count: number }).count).toBeGreaterThanOrEqual(1);
  });

  it('counts failed and parked rows, marks their spans, and reports the lag', async () => {
    await migrateOutbox(db.pool, { schema: `${db.schema}` });
    const destination = unique('flaky');
    // A publisher that refuses everything it is given: each row fails, then is parked.
    const refusing: Publisher = {
      publish: (records) =>
        Promise.resolve(
          new Map(records.map((r) => [r.id, new PublishError(destination, 'refused')])),
        ),
    };
    const { id } = await enqueueTraced('place order', { seq: 9 }, destination);
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { [destination]: refusing },
      telemetry: telemetry(),
      maxAttempts: 2,
      backoff: { initialMs: 0, maxMs: 0 },
      lagIntervalMs: 100,
    });
    await relay.start();
    try {
      await waitFor(() => relay.stats().parked === 1, { what: 'the row parked' });
      // The lag gauge is recorded by the relay's `lag` event, every lagIntervalMs.
      await waitFor(async () => (await otel.points(OUTBOX_METRIC.lag)).length > 0, {
        what: 'a lag point',
      });
    } finally {
      await relay.stop();
    }
    const at = async (name: string) =>
      (await otel.points(name))
        .filter((p) => p.attributes[ATTR.destination] === destination)
        .map((p) => p.value);
    expect(await at(OUTBOX_METRIC.failed)).toEqual([2]);
    expect(await at(OUTBOX_METRIC.parked)).toEqual([1]);
    expect(await at(OUTBOX_METRIC.published)).toEqual([]);
    const lag = await otel.points(OUTBOX_METRIC.lag);
    expect(typeof lag[0]!.value).toBe('number');

    const publishes = named(otel.spans(), `publish ${destination}`);
    expect(publishes.map((s) => s.attributes[ATTR.attempt])).toEqual([1, 2]);
    for (const span of publishes) {
      expect(span.attributes[ATTR.messageId]).toBe(id);
      expect(span.status.code).toBe(SpanStatusCode.ERROR);
      expect(span.attributes['error.type']).toBe('EO_OUTBOX_PUBLISH');
    }
  });

  it('a throwing telemetry hook leaves publishing as it was', async () => {
    await migrateOutbox(db.pool, { schema: db.schema });
    const destination = unique('plain');
    const sent: string[] = [];
    const recording: Publisher = {
      publish: (records) => {
        sent.push(...records.map((r) => r.id));
        return Promise.resolve();
      },
    };
    const broken: RelayTelemetry[] = [
      {
        attach: () => {
          throw new Error('telemetry down');
        },
        startPublish: () => {
          throw new Error('telemetry down');
        },
      },
      {
        startPublish: (_destination, records) => ({
          records,
          end: () => {
            throw new Error('telemetry down');
          },
        }),
      },
    ];
    for (const telemetry of broken) {
      const { id } = await enqueueTraced('place order', { seq: 7 }, destination);
      const relay = createRelay({
        pool: db.pool,
        schema: db.schema,
        publishers: { [destination]: recording },
        telemetry,
      });
      await relay.start();
      try {
        await waitFor(() => relay.stats().published === 1, { what: 'the row published' });
      } finally {
        await relay.stop();
      }
      expect(sent.filter((s) => s === id)).toHaveLength(1);
      expect(relay.stats()).toMatchObject({ published: 1, failed: 0 });
    }
  });
});
