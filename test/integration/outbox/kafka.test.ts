import { describe, expect, it } from '@jest/globals';
import { Kafka, logLevel } from 'kafkajs';
import {
  createRelay,
  migrateOutbox,
  type OutboxMessage,
  type OutboxRecord,
} from 'effectively-once/outbox';
import { kafkaPublisher } from 'effectively-once/kafka';
import type { TestDatabase } from '../../helpers/db.js';
import { kafkaBrokers } from '../../helpers/env.js';
import { FaultProxy } from '../../../kit/fault-proxy.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
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
import { enqueueCommitted } from './support.js';

let db: TestDatabase;
let kafka: Kafka;
kafkaTestEnv('kafka_outbox', (env) => ({ db, kafka } = env));

const KEYS = ['k0', 'k1', 'k2'];
const PER_KEY = 5;

describe('outbox → Kafka → kafkaSource', () => {
  it('a row published twice is applied once, keyed by its outbox id, in order per key', async () => {
    const topic = unique('outbox');
    await createTopics(kafka, [{ topic, partitions: 3 }]);
    await migrateOutbox(db.pool, { schema: db.schema });
    const publisher = kafkaPublisher({ kafka, topic });
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
    }

    // On the topic: two records per row, the record key its ordering key, the id in a header.
    const records = await readTopic(kafka, topic, 2 * ids.length);
    expect(records).toHaveLength(2 * ids.length);
    for (const record of records) {
      const id = header(record.headers, 'eo-outbox-id')!;
      expect(keyOf.has(id)).toBe(true);
      expect(record.key?.toString()).toBe(keyOf.get(id));
    }

    const groupId = unique('g-outbox');
    const running = await startConsumer({ db, kafka, groupId, topics: [topic], member: 'b' });
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

describe('kafkaPublisher honours its abort signal', () => {
  const record = (id: string): OutboxRecord => ({
    id,
    destination: 'events',
    orderingKey: 'k',
    payload: Buffer.from('{}'),
    contentType: 'application/json',
    headers: {},
    attempts: 1,
    createdAt: new Date(),
  });
  const onTopic = async (topic: string): Promise<number> => {
    const admin = kafka.admin();
    await admin.connect();
    try {
      const offsets = await admin.fetchTopicOffsets(topic);
      return offsets.reduce((sum, p) => sum + Number(p.high), 0);
    } finally {
      await admin.disconnect();
    }
  };

  it('sends nothing when the signal is already aborted', async () => {
    const topic = unique('outbox-aborted');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    const publisher = kafkaPublisher({ kafka, topic });
    try {
      const controller = new AbortController();
      controller.abort(new Error('the relay gave up'));
      await expect(
        publisher.publish([record('0190b6b2-6c3e-7a41-9d2e-4f1c2b3a4d5e')], controller.signal),
      ).rejects.toMatchObject({ code: 'EO_OUTBOX_PUBLISH' });
      expect(await onTopic(topic)).toBe(0);
    } finally {
      await publisher.close();
    }
  });

  it('sends nothing after the relay timed the publish out while the producer was connecting', async () => {
    const topic = unique('outbox-late');
    await createTopics(kafka, [{ topic, partitions: 1 }]);
    await migrateOutbox(db.pool, { schema: db.schema });
    await db.pool.query(`TRUNCATE ${db.table('eo_outbox')}`);
    // The publisher's bootstrap broker is a proxy that is down until the relay gave up.
    const [host, port] = kafkaBrokers()[0]!.split(':');
    const proxy = await FaultProxy.create({ target: { host: host!, port: Number(port) } });
    const slowKafka = new Kafka({
      clientId: 'eo-outbox-late',
      brokers: [`127.0.0.1:${proxy.port}`],
      logLevel: logLevel.NOTHING,
      connectionTimeout: 500,
      retry: { initialRetryTime: 100, maxRetryTime: 300, retries: 50 },
    });
    const publisher = kafkaPublisher({ kafka: slowKafka, topic });
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: { events: publisher },
      leaseMs: 1000,
      publishTimeoutMs: 300,
      backoff: { initialMs: 60_000 },
    });
    const failed: unknown[] = [];
    relay.on('failed', (e) => failed.push(e.error));
    try {
      await enqueueCommitted(
        db.pool,
        [{ destination: 'events', orderingKey: 'k', payload: { n: 0 } }],
        db.schema,
      );
      await relay.start();
      await waitFor(() => failed.length === 1, { what: 'the publish timed out' });
      expect(String(failed[0])).toContain('no answer within 300 ms');
      await proxy.up();
      await waitFor(() => proxy.exchanges.length > 0, { what: 'the producer connecting' });
      // Its connect now completes; a send would reach the topic within this time.
      await sleep(2000);
      expect(await onTopic(topic)).toBe(0);
    } finally {
      await relay.stop();
      await publisher.close();
      await proxy.down();
    }
  });
});
