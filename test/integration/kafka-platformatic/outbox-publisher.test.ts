/**
 * kafkaPublisher over a `@platformatic/kafka` Producer (Node >= 22.22, as this whole
 * folder): the outbox → Kafka → kafkaSource round trip of test/integration/outbox/kafka.test.ts,
 * with platformatic on both ends. A row published twice is applied once, keyed by its
 * outbox id, in order per ordering key.
 */
import { describe, expect, it } from '@jest/globals';
import { Producer } from '@platformatic/kafka';
import type { Kafka } from 'kafkajs';
import { kafkaPublisher } from 'effectively-once/kafka';
import { platformaticProducer } from 'effectively-once/kafka/platformatic';
import { createRelay, migrateOutbox, type OutboxMessage } from 'effectively-once/outbox';
import type { TestDatabase } from '../../helpers/db.js';
import { kafkaBrokers } from '../../helpers/env.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  committedOffsets,
  createTopics,
  doubleEffects,
  effects,
  header,
  kafkaTestEnv,
  readTopic,
  startConsumer,
  unique,
} from '../kafka/kafka-helpers.js';
import { enqueueCommitted } from '../outbox/support.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('plt_outbox', (env) => ({ db, kafka } = env));

const KEYS = ['k0', 'k1', 'k2'];
const PER_KEY = 5;

describe('outbox → @platformatic/kafka Producer → kafkaSource', () => {
  it('a row published twice is applied once, keyed by its outbox id, in order per key', async () => {
    const topic = unique('plt-outbox');
    await createTopics(kafka, [{ topic, partitions: 3 }]);
    await migrateOutbox(db.pool, { schema: db.schema });
    const client = new Producer({
      clientId: 'eo-plt-outbox',
      bootstrapBrokers: kafkaBrokers(),
      idempotent: true,
    });
    const publisher = kafkaPublisher({ producer: platformaticProducer(client), topic });
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { events: publisher },
    });
    const messages: OutboxMessage[] = [];
    for (let seq = 0; seq < PER_KEY; seq++)
      for (const k of KEYS)
        messages.push({ destination: 'events', orderingKey: k, payload: { seq } });
    const ids = await enqueueCommitted(db.pool, messages, db.schema);
    const keyOf = new Map(ids.map((id, i) => [id, messages[i]!.orderingKey]));
    await relay.start();
    try {
      await waitFor(() => relay.stats().published === ids.length, { what: 'first publish' });
      // As if the relay had died after each send and before its mark: every row goes again.
      await db.pool.query(
        `UPDATE ${db.table('eo_outbox')} SET state = 'pending', published_at = NULL`,
      );
      relay.wake();
      await waitFor(() => relay.stats().published === 2 * ids.length, { what: 'second publish' });
    } finally {
      await relay.stop();
      await publisher.close();
      // The producer was given, so it is the caller's to close.
      await client.close();
    }

    const records = await readTopic(kafka, topic, 2 * ids.length);
    expect(records).toHaveLength(2 * ids.length);
    for (const record of records) {
      const id = header(record.headers, 'eo-outbox-id')!;
      expect(keyOf.has(id)).toBe(true);
      expect(record.key?.toString()).toBe(keyOf.get(id));
      expect(header(record.headers, 'content-type')).toBe('application/json');
    }

    const groupId = unique('g-plt-outbox');
    const running = await startConsumer({
      db,
      kafka,
      groupId,
      topics: [topic],
      member: 'b',
      client: 'platformatic',
    });
    try {
      await waitFor(
        async () => {
          const offsets = await committedOffsets(kafka, groupId, topic);
          return [...offsets.values()].reduce((a, b) => a + Math.max(0, b), 0) === 2 * ids.length;
        },
        { timeoutMs: 30_000, what: 'every record consumed' },
      );
    } finally {
      await running.stop();
    }
    expect(await doubleEffects(db)).toEqual([]);
    const applied = await effects(db);
    expect(applied.map((e) => e.key).sort()).toEqual([...ids].sort());
    for (const k of KEYS) {
      const order = applied.filter((e) => keyOf.get(e.key) === k).map((e) => e.seq);
      expect(order).toEqual([...Array(PER_KEY).keys()]);
    }
  });
});
