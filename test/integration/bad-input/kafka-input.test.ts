/**
 * Bad input on Kafka, against the real broker. Covered elsewhere, not repeated: a value
 * that is not JSON goes to the dead-letter topic without reaching the handler, and a
 * failing record is retried then dead-lettered (test/integration/kafka/dead-letter.test.ts).
 */
import { describe, expect, it } from '@jest/globals';
import type { Message } from 'kafkajs';
import { DEAD_LETTER_HEADERS, kafkaSource } from '../../../adapters/kafka/index.js';
import { createConsumer } from '../../../src/index.js';
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
} from '../kafka/kafka-helpers.js';
import { AWKWARD_KEYS, TIMEOUT, badInputSuite, observe } from './harness.js';

const suite = badInputSuite('kafka_input');
const kafka = testKafka('eo-bad-input');

const MAX_BODY = 262_144;

function startKafka(topic: string, groupId: string, consumerConfig = {}) {
  const consumer = createConsumer({
    ...suite.options({ lockTimeoutMs: 2000 }),
    source: kafkaSource({
      kafka,
      groupId,
      topics: [topic],
      fromBeginning: true,
      consumerConfig: { ...FAST_GROUP, ...consumerConfig },
      commitIntervalMs: 100,
    }),
  });
  suite.track(consumer);
  return observe(consumer);
}

const keyed = (key: string, value: Message['value']): Message => ({
  partition: 0,
  value,
  headers: { 'idempotency-key': key },
});

describe('bad input on Kafka', () => {
  it(
    'empty, invalid UTF-8 and tombstone values, a 256 KiB value, 10,000-character, NUL, unicode and SQL-looking keys, no key header: each goes where it should and the partition moves on',
    async () => {
      const topic = unique('bad-input');
      await createTopics(kafka, [
        { topic, partitions: 1 },
        { topic: `${topic}.dlq`, partitions: 1 },
      ]);
      const shell = JSON.stringify({ id: 'big', pad: '' });
      const big = JSON.stringify({ id: 'big', pad: 'x'.repeat(MAX_BODY - shell.length) });
      const records: Message[] = [
        keyed('empty', Buffer.alloc(0)),
        keyed('tombstone', null),
        keyed('bad-utf8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d])),
        keyed('big', big),
        keyed('big', big),
        keyed('k'.repeat(10_000), JSON.stringify({ id: 'long-key' })),
        keyed('a\u0000b', JSON.stringify({ id: 'nul-key' })),
        ...AWKWARD_KEYS.flatMap((key, i) => [
          keyed(key, JSON.stringify({ id: `awkward-${i}` })),
          keyed(key, JSON.stringify({ id: `awkward-${i}` })),
        ]),
        { partition: 0, value: JSON.stringify({ id: 'no-header' }) },
        keyed('last', JSON.stringify({ id: 'last' })),
      ];
      await produce(kafka, topic, records);
      const groupId = unique('g-bad-input');
      const worker = startKafka(topic, groupId);
      await worker.consumer.start();
      await waitFor(
        () => {
          const s = worker.consumer.stats();
          return s.processed + s.duplicates + s.deadLettered === records.length;
        },
        { what: 'every record settled', timeoutMs: 30_000 },
      );
      await waitFor(
        async () => (await committedOffsets(kafka, groupId, topic)).get(0) === records.length,
        { what: 'offsets committed past every record' },
      );

      expect(
        worker.deadLettered.map((e) => [e.key?.slice(0, 20), e.error.code, e.error.retryable]),
      ).toEqual([
        ['empty', 'EO_BODY_PARSE', false],
        ['bad-utf8', 'EO_BODY_PARSE', false],
        [undefined, 'EO_INVALID_KEY', false],
        [undefined, 'EO_INVALID_KEY', false],
      ]);
      const effects = await suite.effects();
      // topic/partition/offset/timestamp: the timestamp is the broker's, read back.
      const noHeaderKey = effects
        .map((e) => e.key)
        .find((k) => k.startsWith(`${topic}/0/${records.length - 2}/`));
      expect(noHeaderKey).toMatch(/\/\d+$/);
      expect(effects.map((e) => e.key).sort()).toEqual(
        ['tombstone', 'big', ...AWKWARD_KEYS, noHeaderKey, 'last'].sort(),
      );
      expect(effects.find((e) => e.key === 'tombstone')?.message).toBeNull();
      expect(JSON.stringify(effects.find((e) => e.key === 'big')?.message)).toBe(big);
      expect((await suite.claimedKeys()).sort()).toEqual(effects.map((e) => e.key).sort());
      expect(worker.consumer.stats()).toMatchObject({
        duplicates: 1 + AWKWARD_KEYS.length,
        failed: 0,
      });

      const letters = await readTopic(kafka, `${topic}.dlq`, 4);
      expect(
        letters.map((l) => [
          header(l.headers, DEAD_LETTER_HEADERS.errorCode),
          header(l.headers, DEAD_LETTER_HEADERS.offset),
        ]),
      ).toEqual([
        ['EO_BODY_PARSE', '0'],
        ['EO_BODY_PARSE', '2'],
        ['EO_INVALID_KEY', '5'],
        ['EO_INVALID_KEY', '6'],
      ]);
      expect(letters[0]?.value?.length).toBe(0);
      expect(letters[1]?.value).toEqual(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]));
    },
    TIMEOUT,
  );

  it(
    'key headers that are not UTF-8 are dead-lettered, never read as U+FFFD: two different byte keys are not one',
    async () => {
      const topic = unique('bad-utf8-key');
      await createTopics(kafka, [
        { topic, partitions: 1 },
        { topic: `${topic}.dlq`, partitions: 1 },
      ]);
      // Two binary ids, one payload (two "add 1" commands): 6b ff and 6b fe both decode,
      // leniently, to "k\ufffd", so the second would be a duplicate of the first.
      const records: Message[] = [
        {
          partition: 0,
          value: '{"id":"binary"}',
          headers: { 'idempotency-key': Buffer.from([0x6b, 0xff]) },
        },
        {
          partition: 0,
          value: '{"id":"binary"}',
          headers: { 'idempotency-key': Buffer.from([0x6b, 0xfe]) },
        },
        // A real U+FFFD, spelt in UTF-8, is a key like any other.
        keyed('k\ufffd-real', JSON.stringify({ id: 'real' })),
        keyed('utf8-last', JSON.stringify({ id: 'last' })),
      ];
      await produce(kafka, topic, records);
      const groupId = unique('g-bad-utf8-key');
      const worker = startKafka(topic, groupId);
      await worker.consumer.start();
      await waitFor(
        () => {
          const s = worker.consumer.stats();
          return s.processed + s.duplicates + s.deadLettered === records.length;
        },
        { what: 'every record settled', timeoutMs: 30_000 },
      );
      expect(worker.deadLettered.map((e) => [e.key, e.error.code, e.error.retryable])).toEqual([
        [undefined, 'EO_INVALID_KEY', false],
        [undefined, 'EO_INVALID_KEY', false],
      ]);
      expect((await suite.effects()).map((e) => e.key).sort()).toEqual(
        ['k\ufffd-real', 'utf8-last'].sort(),
      );
      expect(worker.consumer.stats()).toMatchObject({ duplicates: 0, failed: 0 });
      const letters = await readTopic(kafka, `${topic}.dlq`, 2);
      expect(letters.map((l) => header(l.headers, DEAD_LETTER_HEADERS.offset))).toEqual(['0', '1']);
    },
    TIMEOUT,
  );

  it.each([
    ['without auto-creation', { allowAutoTopicCreation: false }],
    ['with auto-creation (kafkajs and broker defaults)', {}],
  ])(
    'unknown topic %s: the receive loop fails fast with a non-retryable EO_BROKER error; once the topic exists a new consumer serves it',
    async (_, consumerConfig) => {
      const topic = unique('no-such-topic');
      const groupId = unique('g-unknown');
      const worker = startKafka(topic, groupId, consumerConfig);
      await worker.consumer.start();
      await waitFor(() => worker.errors.length > 0, { what: 'an error event', timeoutMs: 30_000 });
      const [error] = worker.errors;
      expect(error?.code).toBe('EO_BROKER');
      expect(error?.retryable).toBe(false);
      expect(error?.details).toMatchObject({
        operation: 'start consumer',
        groupId,
        topics: [topic],
      });
      await expect(worker.consumer.done).resolves.toBeUndefined();
      expect(worker.consumer.stats().received).toBe(0);

      await createTopics(kafka, [{ topic, partitions: 1 }]);
      await produce(kafka, topic, [keyed('late-1', JSON.stringify({ id: 'late-1' }))]);
      const again = startKafka(topic, groupId, consumerConfig);
      await again.consumer.start();
      await waitFor(() => again.consumer.stats().processed === 1, {
        what: 'the record',
        timeoutMs: 30_000,
      });
      expect(await suite.effects()).toEqual([{ key: 'late-1', message: { id: 'late-1' } }]);
    },
    TIMEOUT,
  );
});
