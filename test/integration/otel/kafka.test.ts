/**
 * otelTelemetry() on a kafkaSource against the real broker: the producer's
 * `traceparent` header makes the delivery span its child, the spans carry the Kafka
 * messaging attributes (topic, group, partition, offset), and each outcome (processed,
 * duplicate, retry, dead-lettered) shows on its span; the partition's lag is a gauge.
 */
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { EachMessagePayload, Kafka } from 'kafkajs';
import { exactlyOnceEachMessage } from '../../../adapters/kafka/index.js';
import { ATTR, METRIC } from '../../../src/otel/index.js';
import type { TestDatabase } from '../../helpers/db.js';
import { childrenOf, named, otelHarness, parentOf, type OtelHarness } from '../../helpers/otel.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FAST_GROUP,
  committedOffsets,
  createTopics,
  kafkaTestEnv,
  produce,
  startConsumer,
  unique,
} from '../kafka/kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;
let otel: OtelHarness;
kafkaTestEnv('otel_kafka', (env) => ({ db, kafka } = env));
beforeEach(() => {
  otel = otelHarness();
});
afterEach(async () => otel.shutdown());

describe('OpenTelemetry on Kafka', () => {
  it('traces each record as a child of its producer, with every outcome', async () => {
    const topic = unique('otel');
    const groupId = unique('g-otel');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    const producer = otel.producer('publish order');
    await produce(kafka, topic, [
      { partition: 0, value: JSON.stringify({ seq: 0 }), headers: producer.headers },
      { partition: 0, value: JSON.stringify({ seq: 1 }), headers: { 'idempotency-key': 'twice' } },
      { partition: 0, value: JSON.stringify({ seq: 1 }), headers: { 'idempotency-key': 'twice' } },
      { partition: 0, value: JSON.stringify({ seq: 3, fail: true }) },
    ]);
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'a',
      consumer: { telemetry: otel.telemetry, maxAttempts: 2 },
      before: async (body) => {
        if (body.fail) throw new Error('card declined');
      },
    });
    try {
      await waitFor(async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 4, {
        timeoutMs: 30_000,
        what: 'every record to be settled and committed',
      });
    } finally {
      await running.stop();
    }

    const spans = otel.spans();
    const deliveries = named(spans, `process ${topic}`);
    const byOffset = (offset: number) =>
      deliveries.filter((s) => s.attributes['messaging.kafka.offset'] === offset);
    expect(deliveries.map((s) => s.attributes[ATTR.outcome])).toEqual([
      'processed',
      'processed',
      'duplicate',
      'retry',
      'dead-lettered',
    ]);

    const [first] = byOffset(0);
    expect(first!.kind).toBe(SpanKind.CONSUMER);
    expect(first!.spanContext().traceId).toBe(producer.span.spanContext().traceId);
    expect(parentOf(first!)).toBe(producer.span.spanContext().spanId);
    expect(first!.attributes).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.destination.name': topic,
      'messaging.operation.type': 'process',
      'messaging.consumer.group.name': groupId,
      'messaging.destination.partition.id': '0',
      'messaging.kafka.offset': 0,
      [ATTR.key]: expect.stringMatching(new RegExp(`^${topic}/0/0/\\d+$`)),
    });
    const [transaction] = childrenOf(spans, first!);
    expect(childrenOf(spans, transaction!).map((s) => s.name)).toEqual([
      'claim',
      'handler',
      'commit',
    ]);

    // Records without a traceparent start their own trace.
    expect(parentOf(byOffset(1)[0]!)).toBeUndefined();
    expect(byOffset(2)[0]!.attributes).toMatchObject({ [ATTR.key]: 'twice' });

    const [retry, dead] = byOffset(3);
    expect(retry!.attributes).toMatchObject({ [ATTR.attempt]: 1, 'error.type': 'EO_HANDLER' });
    expect(dead!.attributes).toMatchObject({ [ATTR.attempt]: 2, 'error.type': 'EO_HANDLER' });
    expect(dead!.status.code).toBe(SpanStatusCode.ERROR);

    const lag = await otel.points(METRIC.kafkaLag);
    expect(lag).toHaveLength(1);
    expect(lag[0]!.attributes).toMatchObject({
      'messaging.destination.name': topic,
      'messaging.destination.partition.id': '0',
    });
    // The gauge keeps the last record's value: nothing after offset 3.
    expect(lag[0]!.value).toBe(0);
  });

  it('traces exactlyOnceEachMessage records the same way', async () => {
    const topic = unique('otel-each');
    const groupId = unique('g-otel-each');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    const producer = otel.producer('publish payment');
    await produce(kafka, topic, [
      { partition: 0, value: JSON.stringify({ seq: 7 }), headers: producer.headers },
    ]);
    const consumer = kafka.consumer({ groupId, ...FAST_GROUP });
    const deadLetters = kafka.producer();
    await Promise.all([consumer.connect(), deadLetters.connect()]);
    const eo = exactlyOnceEachMessage<EachMessagePayload>(
      async (_payload, { tx }) => {
        await tx.query('SELECT 1');
      },
      {
        name: 'each-otel',
        pool: db.pool,
        schema: db.schema,
        producer: deadLetters,
        telemetry: otel.telemetry,
      },
    );
    try {
      await consumer.subscribe({ topics: [topic], fromBeginning: true });
      await consumer.run({ eachMessage: eo.eachMessage });
      await waitFor(() => eo.consumer.stats().processed === 1, { timeoutMs: 30_000 });
    } finally {
      await consumer.disconnect();
      await eo.stop();
      await deadLetters.disconnect();
    }
    const [span] = named(otel.spans(), `process ${topic}`);
    expect(parentOf(span!)).toBe(producer.span.spanContext().spanId);
    expect(span!.attributes).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.destination.partition.id': '0',
      'messaging.kafka.offset': 0,
      [ATTR.outcome]: 'processed',
    });
  });
});
