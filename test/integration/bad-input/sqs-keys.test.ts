/**
 * Bad keys on SQS, against ElasticMQ and Postgres. Covered elsewhere, not repeated:
 * empty, 256-character, NUL and one unicode key through the runner
 * (test/integration/core/bad-input.test.ts), and schema/table names that look like SQL
 * (test/integration/core/store.test.ts).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { DEAD_LETTER_ERROR_ATTRIBUTE } from '../../../adapters/sqs/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { AWKWARD_KEYS, TIMEOUT, badInputSuite, keyAttribute, settled } from './harness.js';

const suite = badInputSuite('sqs_keys');

function letterError(
  attributes: Record<string, { StringValue?: string }> | undefined,
): Record<string, unknown> {
  return JSON.parse(attributes?.[DEAD_LETTER_ERROR_ATTRIBUTE]?.StringValue ?? '{}') as Record<
    string,
    unknown
  >;
}

describe('bad keys on SQS', () => {
  it(
    'a key of 10,000 characters is dead-lettered as EO_INVALID_KEY without touching the database; others flow',
    async () => {
      const { url } = await suite.queues.create('longkey', { visibilityTimeout: 10 });
      const { url: dlq } = await suite.queues.create('longkey-dlq');
      const long = 'k'.repeat(10_000);
      await suite.queues.send(url, JSON.stringify({ id: 'long' }), {
        MessageAttributes: keyAttribute(long),
      });
      await suite.queues.send(url, JSON.stringify({ id: 'ok' }), {
        MessageAttributes: keyAttribute('ok'),
      });
      const worker = await suite.sqsWorker({
        queueUrl: url,
        key: 'Idempotency-Key',
        deadLetterQueueUrl: dlq,
      });
      await settled(worker, 2, suite.empty(url));
      expect(worker.deadLettered).toHaveLength(1);
      const [event] = worker.deadLettered;
      expect(event?.error.code).toBe('EO_INVALID_KEY');
      expect(event?.error.retryable).toBe(false);
      expect(event?.error.details).toMatchObject({ length: 10_000, maxLength: 255 });
      expect(await suite.effects()).toEqual([{ key: 'ok', message: { id: 'ok' } }]);
      expect(await suite.claimedKeys()).toEqual(['ok']);
      const [letter] = await suite.queues.drain(dlq);
      expect(letter?.MessageAttributes?.['Idempotency-Key']?.StringValue).toBe(long);
      expect(letterError(letter?.MessageAttributes)).toMatchObject({ code: 'EO_INVALID_KEY' });
    },
    TIMEOUT,
  );

  it(
    'unicode and SQL-looking keys are claimed verbatim and applied once each, though each is sent twice',
    async () => {
      const { url } = await suite.queues.create('awkward', { visibilityTimeout: 10 });
      for (const round of [1, 2]) {
        for (const [i, key] of AWKWARD_KEYS.entries()) {
          await suite.queues.send(url, JSON.stringify({ id: `awkward-${i}` }), {
            MessageAttributes: keyAttribute(key),
          });
        }
        if (round === 1)
          await suite.queues.send(url, JSON.stringify({ id: 'plain' }), {
            MessageAttributes: keyAttribute('plain'),
          });
      }
      const worker = await suite.sqsWorker(
        { queueUrl: url, key: 'Idempotency-Key' },
        { concurrency: 4 },
      );
      await settled(worker, 23, suite.empty(url));
      const effects = await suite.effects();
      expect(effects.map((e) => e.key).sort()).toEqual([...AWKWARD_KEYS, 'plain'].sort());
      expect((await suite.claimedKeys()).sort()).toEqual([...AWKWARD_KEYS, 'plain'].sort());
      expect(worker.consumer.stats()).toMatchObject({
        processed: AWKWARD_KEYS.length + 1,
        duplicates: AWKWARD_KEYS.length,
        deadLettered: 0,
        failed: 0,
      });
      // The tables the SQL-looking keys name are still there.
      await expect(
        suite.db.pool.query('SELECT count(*) FROM processed_messages'),
      ).resolves.toBeDefined();
    },
    TIMEOUT,
  );

  it(
    'keys that differ only in lone surrogates (from a key function over the body) are dead-lettered, never merged; others flow',
    async () => {
      const { url } = await suite.queues.create('lonekey', { visibilityTimeout: 10 });
      const { url: dlq } = await suite.queues.create('lonekey-dlq');
      // JSON spells a lone surrogate; Postgres would get U+FFFD for both, one key.
      for (const id of ['"a\\ud800"', '"a\\ud801"', '"ok"'])
        await suite.queues.send(url, `{"id":${id}}`);
      const worker = await suite.sqsWorker({
        queueUrl: url,
        deadLetterQueueUrl: dlq,
        key: (message) => (JSON.parse(message.Body ?? '{}') as { id: string }).id,
      });
      await settled(worker, 3, suite.empty(url));
      expect(worker.deadLettered.map((e) => [e.error.code, e.error.retryable])).toEqual([
        ['EO_INVALID_KEY', false],
        ['EO_INVALID_KEY', false],
      ]);
      expect((await suite.effects()).map((e) => e.key)).toEqual(['ok']);
      expect(await suite.claimedKeys()).toEqual(['ok']);
      expect(await suite.queues.drain(dlq)).toHaveLength(2);
    },
    TIMEOUT,
  );

  it(
    'a message without the configured key attribute is dead-lettered as EO_INVALID_KEY; others flow',
    async () => {
      const { url } = await suite.queues.create('nokey', { visibilityTimeout: 10 });
      const { url: dlq } = await suite.queues.create('nokey-dlq');
      const orphanId = await suite.queues.send(url, JSON.stringify({ id: 'orphan' }), {
        MessageAttributes: { 'Other-Attribute': { DataType: 'String', StringValue: 'x' } },
      });
      await suite.queues.send(url, JSON.stringify({ id: 'keyed' }), {
        MessageAttributes: keyAttribute('keyed'),
      });
      const worker = await suite.sqsWorker({
        queueUrl: url,
        key: 'Idempotency-Key',
        deadLetterQueueUrl: dlq,
      });
      await settled(worker, 2, suite.empty(url));
      expect(worker.deadLettered.map((e) => [e.key, e.error.code, e.error.retryable])).toEqual([
        [undefined, 'EO_INVALID_KEY', false],
      ]);
      expect(worker.deadLettered[0]?.error.details).toMatchObject({
        messageId: orphanId,
        keyAttribute: 'Idempotency-Key',
      });
      expect(await suite.effects()).toEqual([{ key: 'keyed', message: { id: 'keyed' } }]);
      const [letter] = await suite.queues.drain(dlq);
      expect(letter?.MessageAttributes?.['Other-Attribute']?.StringValue).toBe('x');
      expect(letterError(letter?.MessageAttributes)).toMatchObject({
        code: 'EO_INVALID_KEY',
        messageId: orphanId,
      });
    },
    TIMEOUT,
  );

  /*
   * maxKeyLength counts characters, but the unique index holds at most 2704 bytes per
   * entry: validateKey also bounds a key's UTF-8 bytes (MAX_KEY_BYTES), so such a key
   * is dead-lettered as EO_INVALID_KEY instead of failing its claim on every attempt.
   */
  it(
    'a random key within maxKeyLength (1024) but beyond what the unique index holds ends in the dead-letter queue',
    async () => {
      const { url } = await suite.queues.create('indexkey', { visibilityTimeout: 10 });
      const { url: dlq } = await suite.queues.create('indexkey-dlq');
      // Random, so Postgres cannot compress it under the btree limit (2704 bytes per entry):
      // 1000 CJK characters, 3000 UTF-8 bytes, within maxKeyLength's characters.
      const random = randomBytes(2000);
      const key = Array.from({ length: 1000 }, (_, i) =>
        String.fromCharCode(0x4e00 + (random.readUInt16BE(i * 2) % 0x5000)),
      ).join('');
      await suite.queues.send(url, JSON.stringify({ id: 'huge-key' }), {
        MessageAttributes: keyAttribute(key),
      });
      await suite.queues.send(url, JSON.stringify({ id: 'ok' }), {
        MessageAttributes: keyAttribute('ok'),
      });
      const worker = await suite.sqsWorker(
        { queueUrl: url, key: 'Idempotency-Key', deadLetterQueueUrl: dlq },
        { maxKeyLength: 1024, maxAttempts: 2 },
      );
      await waitFor(() => worker.consumer.stats().processed === 1, { what: 'the good message' });
      await waitFor(async () => (await suite.queues.depth(dlq)).total === 1, {
        what: 'the huge key in the DLQ',
        timeoutMs: 8_000,
      });
      // The message reaches the DLQ before the runner reports it dead-lettered.
      await waitFor(() => worker.deadLettered.length === 1, { what: 'the dead-lettered event' });
      expect(worker.deadLettered[0]?.error.code).toBe('EO_INVALID_KEY');
      expect(await suite.effects()).toEqual([{ key: 'ok', message: { id: 'ok' } }]);
    },
    TIMEOUT,
  );
});
