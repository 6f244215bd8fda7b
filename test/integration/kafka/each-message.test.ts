/**
 * `exactlyOnceEachMessage`: an existing kafkajs `eachMessage` handler, wrapped, keeps
 * kafkajs's own offset handling yet applies each record's effect once, even when the
 * group's offsets are reset and every record is delivered again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { EachMessagePayload, Kafka } from 'kafkajs';
import { DEAD_LETTER_HEADERS, exactlyOnceEachMessage } from '../../../adapters/kafka/index.js';
import type { HandlerContext } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FAST_GROUP,
  committedOffsets,
  createTopics,
  header,
  produce,
  readTopic,
  testKafka,
  unique,
} from './kafka-helpers.js';

let db: TestDatabase;
let kafka: Kafka;

beforeAll(async () => {
  db = await createTestDatabase('kafka_each_message');
  await db.pool.query('CREATE TABLE payments (id text NOT NULL, amount int NOT NULL)');
  kafka = testKafka();
}, 30_000);

afterAll(async () => {
  await db.close();
});

/** The app's handler as it was, except that it writes through ctx.tx instead of a pool. */
async function handlePayment(
  { message }: EachMessagePayload,
  { tx }: HandlerContext<EachMessagePayload>,
) {
  const payment = JSON.parse(message.value?.toString() ?? '') as { id: string; amount: number };
  if (payment.amount < 0) throw new Error(`negative amount for ${payment.id}`);
  await tx.query('INSERT INTO payments (id, amount) VALUES ($1, $2)', [payment.id, payment.amount]);
}

async function runOnce(topic: string, groupId: string, until: () => Promise<boolean>) {
  const consumer = kafka.consumer({ groupId, ...FAST_GROUP });
  const producer = kafka.producer();
  await Promise.all([consumer.connect(), producer.connect()]);
  const eo = exactlyOnceEachMessage<EachMessagePayload>(handlePayment, {
    name: 'payments',
    pool: db.pool,
    schema: db.schema,
    producer,
    maxAttempts: 2,
    backoff: { initialMs: 20, maxMs: 20 },
  });
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await consumer.run({ eachMessage: eo.eachMessage });
    await waitFor(until, { timeoutMs: 30_000, what: 'the consumer to catch up' });
    return eo.consumer.stats();
  } finally {
    await consumer.disconnect();
    await eo.stop();
    await producer.disconnect();
  }
}

describe('Kafka: exactlyOnceEachMessage', () => {
  it('applies each payment once across resends, offset resets and a poison record', async () => {
    const topic = unique('each');
    const groupId = unique('g-each');
    await createTopics(kafka, [
      { topic, partitions: 1 },
      { topic: `${topic}.dlq`, partitions: 1 },
    ]);
    const payment = (id: string, amount: number) => ({
      value: JSON.stringify({ id, amount }),
      headers: { 'idempotency-key': `pay-${id}` },
    });
    // p2 is resent by its producer; p3 can never succeed.
    await produce(kafka, topic, [
      payment('p1', 10),
      payment('p2', 20),
      payment('p2', 20),
      payment('p3', -1),
      payment('p4', 40),
    ]);
    const paymentsDone = async () => {
      const { rows } = await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM payments',
      );
      return rows[0]?.n === 3 && (await committedOffsets(kafka, groupId, topic)).get(0) === 5;
    };

    const first = await runOnce(topic, groupId, paymentsDone);
    expect(first).toMatchObject({ processed: 3, duplicates: 1, deadLettered: 1 });

    const [letter] = await readTopic(kafka, `${topic}.dlq`, 1);
    expect(header(letter?.headers, 'idempotency-key')).toBe('pay-p3');
    expect(header(letter?.headers, DEAD_LETTER_HEADERS.offset)).toBe('3');
    expect(header(letter?.headers, DEAD_LETTER_HEADERS.attempts)).toBe('2');

    // An operator replays the topic: every payment comes back, none is applied again.
    const admin = kafka.admin();
    await admin.connect();
    await admin.resetOffsets({ groupId, topic, earliest: true });
    await admin.disconnect();
    const second = await runOnce(
      topic,
      groupId,
      async () => (await committedOffsets(kafka, groupId, topic)).get(0) === 5,
    );
    expect(second).toMatchObject({ processed: 0, duplicates: 4 });
    const { rows } = await db.pool.query<{ id: string }>('SELECT id FROM payments ORDER BY id');
    expect(rows.map((r) => r.id)).toEqual(['p1', 'p2', 'p4']);
  }, 60_000);
});
