/**
 * otelTelemetry() on a consumer over memorySource and the real Postgres: the spans'
 * names, parent/child structure and attributes for each outcome, the producer's
 * traceparent as parent (one message) or links (a batch), and the metrics, all read
 * from the official SDK's in-memory exporters.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { ATTR, METRIC } from '../../../src/otel/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { childrenOf, named, otelHarness, parentOf, type OtelHarness } from '../../helpers/otel.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
let otel: OtelHarness;
beforeAll(async () => {
  db = await createTestDatabase('otel_memory');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges; DROP TABLE IF EXISTS processed_messages');
  otel = otelHarness();
});
afterEach(async () => otel.shutdown());

const deliverySpans = () => named(otel.spans(), 'process memory');

describe('one transaction per message', () => {
  it('makes the delivery span a child of the producer, with transaction > claim, handler, commit', async () => {
    const inHandler = otel.tracer('app');
    const h = await memoryHarness(db, {
      telemetry: otel.telemetry,
      after: async () => inHandler.startSpan('charge card').end(),
    });
    const producer = otel.producer();
    const m = h.source.send({ id: 'o1', amount: 5 }, { key: 'o1', headers: producer.headers });
    await h.consumer.start();
    await waitFor(() => m.state === 'acked');
    await h.consumer.stop();

    const spans = otel.spans();
    const [delivery] = deliverySpans();
    expect(deliverySpans()).toHaveLength(1);
    expect(delivery!.kind).toBe(SpanKind.CONSUMER);
    expect(delivery!.spanContext().traceId).toBe(producer.span.spanContext().traceId);
    expect(parentOf(delivery!)).toBe(producer.span.spanContext().spanId);
    expect(delivery!.attributes).toMatchObject({
      'messaging.system': 'memory',
      'messaging.destination.name': 'memory',
      'messaging.operation.type': 'process',
      'messaging.message.id': '1',
      [ATTR.consumer]: 'charges',
      [ATTR.key]: 'o1',
      [ATTR.attempt]: 1,
      [ATTR.outcome]: 'processed',
    });
    expect(delivery!.status.code).toBe(SpanStatusCode.UNSET);

    const [transaction] = childrenOf(spans, delivery!);
    expect(childrenOf(spans, delivery!).map((s) => s.name)).toEqual(['transaction']);
    expect(childrenOf(spans, transaction!).map((s) => s.name)).toEqual([
      'claim',
      'handler',
      'commit',
    ]);
    // The handler runs in its span's context: the application's own spans nest in it.
    const handler = named(spans, 'handler')[0]!;
    expect(childrenOf(spans, handler).map((s) => s.name)).toEqual(['charge card']);
  });

  it('marks a redelivered key duplicate: a claim, no handler, no commit', async () => {
    const h = await memoryHarness(db, { telemetry: otel.telemetry });
    const first = h.source.send({ id: 'o2', amount: 1 }, { key: 'o2' });
    await h.consumer.start();
    await waitFor(() => first.state === 'acked');
    const again = h.source.send({ id: 'o2', amount: 1 }, { key: 'o2' });
    await waitFor(() => again.state === 'acked');
    await h.consumer.stop();

    const spans = otel.spans();
    const outcomes = deliverySpans().map((s) => s.attributes[ATTR.outcome]);
    expect(outcomes).toEqual(['processed', 'duplicate']);
    const duplicate = deliverySpans()[1]!;
    const [transaction] = childrenOf(spans, duplicate);
    expect(childrenOf(spans, transaction!).map((s) => s.name)).toEqual(['claim']);
    // Without a producer context the delivery span is a root.
    expect(parentOf(duplicate)).toBeUndefined();
  });

  it('records a failed attempt as retry with the error, then processed', async () => {
    let calls = 0;
    const h = await memoryHarness(db, {
      telemetry: otel.telemetry,
      before: async () => {
        if (++calls === 1) throw new Error('card declined');
      },
    });
    const m = h.source.send({ id: 'o3', amount: 1 }, { key: 'o3' });
    await h.consumer.start();
    await waitFor(() => m.state === 'acked');
    await h.consumer.stop();

    const [retry, processed] = deliverySpans();
    expect(retry!.attributes).toMatchObject({
      [ATTR.outcome]: 'retry',
      [ATTR.attempt]: 1,
      'error.type': 'EO_HANDLER',
    });
    expect(retry!.status.code).toBe(SpanStatusCode.ERROR);
    expect(retry!.events.map((e) => e.name)).toContain('exception');
    const failedHandler = named(otel.spans(), 'handler').find(
      (s) => s.spanContext().traceId === retry!.spanContext().traceId,
    )!;
    expect(failedHandler.status).toMatchObject({
      code: SpanStatusCode.ERROR,
      message: 'card declined',
    });
    expect(processed!.attributes).toMatchObject({ [ATTR.outcome]: 'processed', [ATTR.attempt]: 2 });
  });

  it('records a dead letter after the last attempt', async () => {
    const h = await memoryHarness(db, {
      telemetry: otel.telemetry,
      maxAttempts: 2,
      before: async () => {
        throw new Error('poison');
      },
    });
    const m = h.source.send({ id: 'o4', amount: 1 }, { key: 'o4' });
    await h.consumer.start();
    await waitFor(() => m.state === 'dead-lettered');
    await h.consumer.stop();

    expect(deliverySpans().map((s) => s.attributes[ATTR.outcome])).toEqual([
      'retry',
      'dead-lettered',
    ]);
    expect(deliverySpans()[1]!.status.code).toBe(SpanStatusCode.ERROR);
    const points = await otel.points(METRIC.deliveries);
    const byOutcome: Record<string, unknown> = {};
    for (const p of points) byOutcome[String(p.attributes[ATTR.outcome])] = p.value;
    expect(byOutcome).toEqual({ retry: 1, 'dead-lettered': 1 });
  });

  it('records a key reused with another payload as mismatch', async () => {
    const h = await memoryHarness(db, { telemetry: otel.telemetry });
    const first = h.source.send({ id: 'o5', amount: 1 }, { key: 'o5' });
    await h.consumer.start();
    await waitFor(() => first.state === 'acked');
    const other = h.source.send({ id: 'o5', amount: 2 }, { key: 'o5' });
    await waitFor(() => other.state === 'dead-lettered');
    await h.consumer.stop();

    const mismatch = deliverySpans()[1]!;
    expect(mismatch.attributes).toMatchObject({
      [ATTR.outcome]: 'mismatch',
      'error.type': 'EO_PAYLOAD_MISMATCH',
    });
    expect(mismatch.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('counts outcomes, times handlers and transactions, observes in-flight and pruning', async () => {
    const h = await memoryHarness(db, {
      telemetry: otel.telemetry,
      retention: { olderThanMs: 1, intervalMs: 100 },
    });
    const pruned = new Promise((resolve) => h.consumer.on('pruned', resolve));
    const a = h.source.send({ id: 'o6', amount: 1 }, { key: 'o6' });
    const b = h.source.send({ id: 'o7', amount: 1 }, { key: 'o7' });
    await h.consumer.start();
    await waitFor(() => a.state === 'acked' && b.state === 'acked');
    await pruned;
    const inFlight = await otel.points(METRIC.inFlight);
    expect(inFlight.map((p) => [p.attributes[ATTR.consumer], p.value])).toEqual([['charges', 0]]);
    await h.consumer.stop();

    const [processed] = await otel.points(METRIC.deliveries);
    expect(processed).toMatchObject({
      attributes: { [ATTR.outcome]: 'processed', [ATTR.consumer]: 'charges' },
      value: 2,
    });
    for (const name of [
      METRIC.handlerDuration,
      METRIC.transactionDuration,
      METRIC.processDuration,
    ]) {
      const [point] = await otel.points(name);
      expect((point!.value as { count: number }).count).toBe(2);
    }
    const [rows] = await otel.points(METRIC.pruned);
    expect(rows!.value).toBeGreaterThanOrEqual(1);
  });
});

describe('batch mode', () => {
  it('makes one span per batch, linked to each producer, with each outcome as an event', async () => {
    await db.pool.query('CREATE TABLE IF NOT EXISTS charges (id text NOT NULL)');
    const source = memorySource<{ id: string }>();
    const consumer = createConsumer<{ id: string }>({
      name: 'batched',
      source,
      pool: db.pool,
      schema: db.schema,
      telemetry: otel.telemetry,
      batch: { maxSize: 3, maxWaitMs: 1000 },
      batchHandler: async (items, ctx) => {
        for (const item of items)
          await ctx.tx.query('INSERT INTO charges (id) VALUES ($1)', [item.message.id]);
      },
    });
    const producers = [otel.producer('p1'), otel.producer('p2'), otel.producer('p3')];
    // Two new keys and a duplicate of the first inside the same batch.
    const sent = [
      source.send({ id: 'b1' }, { key: 'b1', headers: producers[0]!.headers }),
      source.send({ id: 'b2' }, { key: 'b2', headers: producers[1]!.headers }),
      source.send({ id: 'b1' }, { key: 'b1', headers: producers[2]!.headers }),
    ];
    await consumer.start();
    await waitFor(() => sent.every((m) => m.state === 'acked'));
    await consumer.stop();

    const spans = otel.spans();
    const batches = named(spans, 'process memory');
    expect(batches).toHaveLength(1);
    const batch = batches[0]!;
    expect(parentOf(batch)).toBeUndefined();
    expect(batch.attributes).toMatchObject({
      'messaging.batch.message_count': 3,
      [ATTR.outcome]: 'mixed',
      [`${ATTR.outcome}.processed`]: 2,
      [`${ATTR.outcome}.duplicate`]: 1,
    });
    expect(batch.links.map((l) => l.context.spanId)).toEqual(
      producers.map((p) => p.span.spanContext().spanId),
    );
    expect(batch.links.map((l) => l.attributes?.['messaging.message.id'])).toEqual(['1', '2', '3']);
    expect(
      batch.events.filter((e) => e.name === 'settled').map((e) => e.attributes?.[ATTR.outcome]),
    ).toEqual(['processed', 'processed', 'duplicate']);
    const [transaction] = childrenOf(spans, batch);
    expect(childrenOf(spans, transaction!).map((s) => s.name)).toEqual([
      'claim',
      'handler',
      'commit',
    ]);
  });
});
