import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Kafka, logLevel, type Admin, type Producer } from 'kafkajs';
import { main as kafkaBatchWorker } from '../../../examples/kafka-batch-worker.js';
import { main as kafkaWorker } from '../../../examples/kafka-worker.js';
import { main as wrappedEachMessage } from '../../../examples/wrap-kafkajs-each-message.js';
import { kafkaBrokers } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';
import { createExampleDatabase } from './support.js';

let kafka: Kafka;
let admin: Admin;
let producer: Producer;

beforeAll(async () => {
  kafka = new Kafka({
    clientId: 'examples-test',
    brokers: kafkaBrokers(),
    logLevel: logLevel.NOTHING,
  });
  admin = kafka.admin();
  producer = kafka.producer();
  await Promise.all([admin.connect(), producer.connect()]);
});

afterAll(async () => {
  await Promise.allSettled([admin.disconnect(), producer.disconnect()]);
});

async function createTopic(prefix: string): Promise<string> {
  const topic = `ex-${prefix}-${randomBytes(4).toString('hex')}`;
  await admin.createTopics({
    topics: [{ topic, numPartitions: 3 }, { topic: `${topic}.dlq` }],
    waitForLeaders: true,
  });
  return topic;
}

/** Sends each value as JSON with an `idempotency-key` header; `key` picks the partition. */
async function produce(
  topic: string,
  records: Array<{ key: string; idempotencyKey: string; value: unknown }>,
) {
  await producer.send({
    topic,
    messages: records.map((r) => ({
      key: r.key,
      value: JSON.stringify(r.value),
      headers: { 'idempotency-key': r.idempotencyKey },
    })),
  });
}

/** True once the group's committed offsets reached the end of every partition that has records. */
async function caughtUp(groupId: string, topic: string): Promise<boolean> {
  const [ends, committed] = await Promise.all([
    admin.fetchTopicOffsets(topic),
    admin.fetchOffsets({ groupId, topics: [topic] }),
  ]);
  const done = new Map(committed[0]?.partitions.map((p) => [p.partition, Number(p.offset)]) ?? []);
  // A partition nothing was produced to has no committed offset, and needs none.
  return ends.every(
    (end) => end.high === end.low || (done.get(end.partition) ?? -1) >= Number(end.high),
  );
}

type Main = (options: { signal: AbortSignal; env?: NodeJS.ProcessEnv }) => Promise<void>;

async function runUntilCaughtUp(
  main: Main,
  env: NodeJS.ProcessEnv,
  groupId: string,
  topic: string,
) {
  const stop = new AbortController();
  const running = main({ signal: stop.signal, env });
  try {
    await waitFor(() => caughtUp(groupId, topic), {
      timeoutMs: 60_000,
      intervalMs: 250,
      what: 'the group to catch up',
    });
  } finally {
    stop.abort();
    await running;
  }
}

describe('Kafka examples run against the real broker', () => {
  it('kafka-worker.ts creates each shipment once although records were produced twice', async () => {
    const db = await createExampleDatabase('kafka_worker');
    const topic = await createTopic('shipments');
    const groupId = `${topic}-group`;
    try {
      const shipments = Array.from({ length: 9 }, (_, i) => ({
        shipmentId: `s-${i}`,
        orderId: `o-${i % 4}`,
        carrier: i % 2 ? 'dhl' : 'ups',
      }));
      const records = shipments.map((s) => ({
        key: s.orderId,
        idempotencyKey: s.shipmentId,
        value: s,
      }));
      await produce(topic, records);
      await produce(topic, records.slice(0, 4)); // the producer retried a batch
      await runUntilCaughtUp(
        kafkaWorker,
        { ...process.env, DATABASE_URL: db.url, KAFKA_TOPIC: topic, KAFKA_GROUP: groupId },
        groupId,
        topic,
      );
      const { rows } = await db.pool.query<{ shipment_id: string; n: string }>(
        'SELECT shipment_id, count(*) AS n FROM shipments GROUP BY shipment_id ORDER BY shipment_id',
      );
      expect(rows.map((r) => [r.shipment_id, Number(r.n)])).toEqual(
        shipments.map((s) => [s.shipmentId, 1]),
      );
    } finally {
      await db.drop();
    }
  }, 90_000);

  it('kafka-batch-worker.ts: batch mode applies each price change once, offsets stored with them', async () => {
    const db = await createExampleDatabase('kafka_batch');
    const topic = await createTopic('prices');
    const groupId = `${topic}-group`;
    try {
      const changes = Array.from({ length: 300 }, (_, i) => ({ sku: `sku-${i % 7}`, cents: i }));
      const records = changes.map((c, i) => ({
        key: c.sku,
        idempotencyKey: `price-${i}`,
        value: c,
      }));
      await produce(topic, records);
      await produce(topic, records.slice(100, 150)); // the producer retried a batch
      await runUntilCaughtUp(
        kafkaBatchWorker,
        { ...process.env, DATABASE_URL: db.url, KAFKA_TOPIC: topic, KAFKA_GROUP: groupId },
        groupId,
        topic,
      );
      const { rows } = await db.pool.query<{ cents: number }>(
        'SELECT cents FROM price_changes ORDER BY cents',
      );
      expect(rows.map((r) => r.cents)).toEqual(changes.map((c) => c.cents));
      const ends = await admin.fetchTopicOffsets(topic);
      const { rows: stored } = await db.pool.query<{ partition: number; next_offset: string }>(
        'SELECT partition, next_offset FROM eo_kafka_offsets WHERE topic = $1 ORDER BY partition',
        [topic],
      );
      // Each effect's transaction stored its partition's next offset (duplicates at the tail,
      // which commit nothing, leave it where the last effect put it).
      const withRecords = ends.filter((e) => e.high !== e.low);
      expect(stored.map((r) => r.partition).sort()).toEqual(
        withRecords.map((e) => e.partition).sort(),
      );
      for (const row of stored) {
        const end = withRecords.find((e) => e.partition === row.partition);
        expect(Number(row.next_offset)).toBeGreaterThan(0);
        expect(Number(row.next_offset)).toBeLessThanOrEqual(Number(end?.high));
      }
    } finally {
      await db.drop();
    }
  }, 90_000);

  it('wrap-kafkajs-each-message.ts: the kafkajs app captures each payment once', async () => {
    const db = await createExampleDatabase('kafka_each');
    const topic = await createTopic('payments');
    const groupId = `${topic}-group`;
    try {
      const payments = Array.from({ length: 6 }, (_, i) => ({
        paymentId: `p-${i}`,
        accountId: `a-${i % 2}`,
        amountCents: 100 + i,
      }));
      const records = payments.map((p) => ({
        key: p.accountId,
        idempotencyKey: p.paymentId,
        value: p,
      }));
      await produce(topic, records);
      await produce(topic, records.slice(2, 5));
      await runUntilCaughtUp(
        wrappedEachMessage,
        { ...process.env, DATABASE_URL: db.url, KAFKA_TOPIC: topic, KAFKA_GROUP: groupId },
        groupId,
        topic,
      );
      const { rows } = await db.pool.query<{ payment_id: string; n: string }>(
        'SELECT payment_id, count(*) AS n FROM captured_payments GROUP BY payment_id ORDER BY payment_id',
      );
      expect(rows.map((r) => [r.payment_id, Number(r.n)])).toEqual(
        payments.map((p) => [p.paymentId, 1]),
      );
    } finally {
      await db.drop();
    }
  }, 90_000);
});
