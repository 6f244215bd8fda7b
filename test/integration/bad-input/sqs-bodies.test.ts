/**
 * Bad bodies on SQS, against ElasticMQ. Covered elsewhere, not repeated here:
 * a body that is not JSON goes to the DLQ through the redrive policy and through
 * `deadLetterQueueUrl` (test/integration/sqs/dead-letters.test.ts), and a rejected body
 * never reaches the handler (test/integration/core/bad-input.test.ts).
 */
import { describe, expect, it } from '@jest/globals';
import { DEAD_LETTER_ERROR_ATTRIBUTE } from '../../../adapters/sqs/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, badInputSuite, keyAttribute, settled } from './harness.js';

const suite = badInputSuite('sqs_bodies');

/** SQS's (and ElasticMQ's) largest message body: 256 KiB. */
const MAX_BODY = 262_144;

function deadLetterCode(attributes: Record<string, { StringValue?: string }> | undefined): unknown {
  const raw = attributes?.[DEAD_LETTER_ERROR_ATTRIBUTE]?.StringValue;
  return raw === undefined ? undefined : (JSON.parse(raw) as { code: unknown }).code;
}

describe('bad bodies on SQS', () => {
  it(
    'empty body: SQS refuses to store it; a blank body is dead-lettered as EO_BODY_PARSE; with parse "text" it is handled',
    async () => {
      const { url } = await suite.queues.create('empty', { visibilityTimeout: 10 });
      const { url: dlq } = await suite.queues.create('empty-dlq');
      // The producer finds out at once: an empty MessageBody is not a message.
      await expect(
        suite.queues.send(url, '', { MessageAttributes: keyAttribute('empty') }),
      ).rejects.toThrow(/MessageBody/);
      await suite.queues.send(url, ' ', { MessageAttributes: keyAttribute('blank') });
      await suite.queues.send(url, JSON.stringify({ id: 'after-blank' }), {
        MessageAttributes: keyAttribute('good'),
      });
      const worker = await suite.sqsWorker({
        queueUrl: url,
        key: 'Idempotency-Key',
        deadLetterQueueUrl: dlq,
      });
      await settled(worker, 2, suite.empty(url));
      expect(worker.deadLettered.map((e) => [e.key, e.error.code, e.error.retryable])).toEqual([
        ['blank', 'EO_BODY_PARSE', false],
      ]);
      expect(await suite.effects()).toEqual([{ key: 'good', message: { id: 'after-blank' } }]);
      const [letter, ...more] = await suite.queues.drain(dlq);
      expect(more).toEqual([]);
      expect(letter?.Body).toBe(' ');
      expect(deadLetterCode(letter?.MessageAttributes)).toBe('EO_BODY_PARSE');

      // The same blank body is a valid text message. (A queue of its own: the first
      // worker's aborted long poll may still hold a slot on the old one.)
      const { url: textUrl } = await suite.queues.create('empty-text', { visibilityTimeout: 10 });
      await suite.queues.send(textUrl, ' ', { MessageAttributes: keyAttribute('blank-text') });
      const text = await suite.sqsWorker<string>({
        queueUrl: textUrl,
        key: 'Idempotency-Key',
        parse: 'text',
      });
      await waitFor(() => text.consumer.stats().processed === 1, { what: 'blank text handled' });
      expect((await suite.effects()).at(-1)).toEqual({ key: 'blank-text', message: ' ' });
    },
    TIMEOUT,
  );

  it(
    '256 KiB body (the SQS limit): applied once though sent twice; one byte more is refused at send; a 256 KiB non-JSON body is dead-lettered whole',
    async () => {
      const { url } = await suite.queues.create('big', { visibilityTimeout: 10 });
      const { url: dlq } = await suite.queues.create('big-dlq');
      const shell = JSON.stringify({ id: 'big', pad: '' });
      const body = JSON.stringify({ id: 'big', pad: 'x'.repeat(MAX_BODY - shell.length) });
      expect(Buffer.byteLength(body)).toBe(MAX_BODY);
      await expect(
        suite.queues.send(url, `${body} `, { MessageAttributes: keyAttribute('too-big') }),
      ).rejects.toThrow(/MessageTooLong|too long/i);
      await suite.queues.send(url, body, { MessageAttributes: keyAttribute('big') });
      await suite.queues.send(url, body, { MessageAttributes: keyAttribute('big') });
      const notJson = `<${'y'.repeat(MAX_BODY - 2)}>`;
      await suite.queues.send(url, notJson, { MessageAttributes: keyAttribute('big-not-json') });
      await suite.queues.send(url, JSON.stringify({ id: 'small' }), {
        MessageAttributes: keyAttribute('small'),
      });

      const worker = await suite.sqsWorker({
        queueUrl: url,
        key: 'Idempotency-Key',
        deadLetterQueueUrl: dlq,
      });
      await settled(worker, 4, suite.empty(url));
      const effects = await suite.effects();
      expect(effects.map((e) => e.key).sort()).toEqual(['big', 'small']);
      expect(JSON.stringify(effects.find((e) => e.key === 'big')?.message)).toBe(body);
      expect(worker.consumer.stats()).toMatchObject({
        processed: 2,
        duplicates: 1,
        deadLettered: 1,
        mismatches: 0,
      });
      expect(worker.deadLettered.map((e) => [e.key, e.error.code])).toEqual([
        ['big-not-json', 'EO_BODY_PARSE'],
      ]);
      const [letter] = await suite.queues.drain(dlq);
      expect(letter?.Body).toBe(notJson);
      expect(deadLetterCode(letter?.MessageAttributes)).toBe('EO_BODY_PARSE');
    },
    TIMEOUT,
  );
});
