import { describe, expect, it } from '@jest/globals';
import { decodeRecord } from '../../../adapters/kafka/decode.js';
import { deadLetterMessage } from '../../../adapters/kafka/dead-letter.js';
import {
  defaultKafkaKey,
  headerText,
  kafkaRecordOf,
  DEAD_LETTER_HEADERS,
  type KafkaRecord,
} from '../../../adapters/kafka/index.js';
import { orderingKeyOf } from '../../../adapters/kafka/keys.js';
import { Limiter } from '../../../adapters/kafka/limiter.js';
import { toKafkaRecord } from '../../../adapters/kafka/record.js';
import { BodyParseError, HandlerError } from '../../../src/errors.js';
import { message } from '../../../kit/kafka-fakes.js';

const record = (fields: Partial<Parameters<typeof message>[1]> = {}, offset = 42): KafkaRecord =>
  toKafkaRecord({ topic: 'orders', partition: 3, messages: [] }, message(offset, fields));

describe('keys', () => {
  it('reads the idempotency header exactly, then case-insensitively, last value of a repeated one', () => {
    expect(headerText({ 'idempotency-key': Buffer.from('a') }, 'idempotency-key')).toBe('a');
    expect(headerText({ 'Idempotency-Key': 'b' }, 'idempotency-key')).toBe('b');
    expect(headerText({ 'idempotency-key': ['x', Buffer.from('y')] }, 'idempotency-key')).toBe('y');
    expect(headerText({ other: 'z' }, 'idempotency-key')).toBeUndefined();
  });

  it('keys by header when present, else by topic/partition/offset/timestamp; an empty header stays empty', () => {
    expect(
      defaultKafkaKey(record({ headers: { 'idempotency-key': 'op-1' } }), 'idempotency-key'),
    ).toBe('op-1');
    expect(defaultKafkaKey(record(), 'idempotency-key')).toBe('orders/3/42/1700000000000');
    expect(defaultKafkaKey(record({ headers: { 'idempotency-key': '' } }), 'idempotency-key')).toBe(
      '',
    );
    expect(defaultKafkaKey(record({ headers: { 'x-id': 'custom' } }), 'x-id')).toBe('custom');
  });

  it("keys a record by its timestamp too: a recreated topic's record at the same offset is another key", () => {
    const old = record({ timestamp: '1700000000000' });
    const again = record({ timestamp: '1700000000000' }); // a redelivery: the log kept it
    const recreated = record({ timestamp: '1700000360000' }); // offset 42 of the new topic
    expect(defaultKafkaKey(again, 'idempotency-key')).toBe(defaultKafkaKey(old, 'idempotency-key'));
    expect(defaultKafkaKey(recreated, 'idempotency-key')).toBe('orders/3/42/1700000360000');
    expect(defaultKafkaKey(recreated, 'idempotency-key')).not.toBe(
      defaultKafkaKey(old, 'idempotency-key'),
    );
  });

  it("keys an outbox relay's record by its eo-outbox-id header unless the idempotency header is set", () => {
    const outbox = { 'eo-outbox-id': '0190b6b2-0000-7000-8000-000000000001' };
    expect(defaultKafkaKey(record({ headers: outbox }), 'idempotency-key')).toBe(
      '0190b6b2-0000-7000-8000-000000000001',
    );
    expect(
      defaultKafkaKey(
        record({ headers: { ...outbox, 'idempotency-key': 'op-1' } }),
        'idempotency-key',
      ),
    ).toBe('op-1');
  });

  it('orders by partition, or by Kafka key with key concurrency', () => {
    expect(orderingKeyOf(record({ key: Buffer.from('a') }), false)).toBe('orders/3');
    expect(orderingKeyOf(record({ key: Buffer.from('a') }), true)).toBe('orders/3/k:YQ==');
    expect(orderingKeyOf(record({ key: Buffer.from('/') }), true)).not.toBe(
      orderingKeyOf(record({ key: Buffer.from('\\') }), true),
    );
    expect(orderingKeyOf(record({ key: null }), true)).toBe('orders/3/null');
  });

  it('finds the record behind a Kafka delivery only', () => {
    const r = record();
    expect(kafkaRecordOf({ raw: r })).toBe(r);
    expect(() => kafkaRecordOf({ raw: { ...r } })).toThrow(TypeError);
  });
});

describe('decodeRecord', () => {
  it('parses JSON by default and rejects what is not JSON or not UTF-8 with BodyParseError', () => {
    expect(decodeRecord(record({ value: Buffer.from('{"a":1}') }), 'json')).toEqual({
      body: { a: 1 },
    });
    const bad = decodeRecord(record({ value: Buffer.from('{oops') }), 'json');
    expect(bad.rejection).toBeInstanceOf(BodyParseError);
    expect(bad.rejection?.details).toMatchObject({ topic: 'orders', partition: 3, offset: '42' });
    expect(
      decodeRecord(record({ value: Buffer.from([0xff, 0xfe]) }), 'text').rejection,
    ).toBeInstanceOf(BodyParseError);
  });

  it('hands tombstones over as null, text as string, bytes as Buffer, or through a function', () => {
    expect(decodeRecord(record({ value: null }), 'json')).toEqual({ body: null });
    expect(decodeRecord(record({ value: Buffer.from('héllo') }), 'text')).toEqual({
      body: 'héllo',
    });
    expect(decodeRecord(record({ value: Buffer.from([1, 2]) }), 'buffer').body).toEqual(
      Buffer.from([1, 2]),
    );
    expect(decodeRecord(record(), (r) => r.offset)).toEqual({ body: '42' });
    const thrown = decodeRecord(record(), () => {
      throw new Error('schema mismatch');
    });
    expect(thrown.rejection).toBeInstanceOf(BodyParseError);
  });
});

describe('deadLetterMessage', () => {
  it('keeps key, value and headers, and adds provenance, error and attempts', () => {
    const r = record({
      key: Buffer.from('k'),
      headers: { 'idempotency-key': 'op', multi: ['1', '2'] },
    });
    const dl = deadLetterMessage(r, new HandlerError('op', 5, new Error('x'.repeat(5000))), 5);
    expect(dl.key).toEqual(Buffer.from('k'));
    expect(dl.value).toEqual(r.value);
    expect(dl.headers).toMatchObject({
      'idempotency-key': 'op',
      multi: ['1', '2'],
      [DEAD_LETTER_HEADERS.topic]: 'orders',
      [DEAD_LETTER_HEADERS.partition]: '3',
      [DEAD_LETTER_HEADERS.offset]: '42',
      [DEAD_LETTER_HEADERS.attempts]: '5',
      [DEAD_LETTER_HEADERS.errorCode]: 'EO_HANDLER',
    });
    expect(String(dl.headers?.[DEAD_LETTER_HEADERS.error]).length).toBeLessThanOrEqual(4097);
  });
});

describe('Limiter', () => {
  it('grants slots up to the limit, hands released slots over in FIFO order, and drops aborted waiters', async () => {
    const limiter = new Limiter(1);
    const never = new AbortController().signal;
    expect(await limiter.acquire(never)).toBe(true);
    const order: string[] = [];
    const aborted = new AbortController();
    const a = limiter.acquire(aborted.signal).then((ok) => order.push(`a:${ok}`));
    const b = limiter.acquire(never).then((ok) => order.push(`b:${ok}`));
    aborted.abort();
    await a;
    limiter.release();
    await b;
    expect(order).toEqual(['a:false', 'b:true']);
    expect(limiter.inUse).toBe(1);
    limiter.release();
    expect(limiter.inUse).toBe(0);
  });
});
