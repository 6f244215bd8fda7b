import { describe, expect, it } from '@jest/globals';
import type { KafkaRecord } from '../../../adapters/kafka/index.js';
import { byEventId, byRecordKey } from '../../../examples/kafka-keys.js';

function record(fields: Partial<KafkaRecord>): KafkaRecord {
  return {
    topic: 'orders',
    partition: 2,
    offset: '41',
    key: null,
    value: null,
    headers: {},
    timestamp: '0',
    ...fields,
  };
}

describe('examples/kafka-keys.ts (docs/keys-and-the-dedup-window.md)', () => {
  it('byRecordKey: the record key as text, else the idempotency-key header, else the offset', () => {
    expect(byRecordKey(record({ key: Buffer.from('op-7') }))).toBe('op-7');
    expect(byRecordKey(record({ headers: { 'idempotency-key': Buffer.from('op-8') } }))).toBe(
      'op-8',
    );
    expect(byRecordKey(record({ timestamp: '1700000000123' }))).toBe('orders/2/41/1700000000123');
  });

  it('byRecordKey: a binary record key is refused, never read as U+FFFD (two ids would be one key)', () => {
    // Raw 16-byte UUIDs differing in one byte past 0x7f: lenient UTF-8 reads both with
    // U+FFFD there, one text for two ids.
    const uuid = (last: number) =>
      Buffer.from([...Array(15).keys()].map((i) => 0x41 + i).concat(last));
    const a = record({ key: uuid(0xff) });
    const b = record({ key: uuid(0xfe) });
    expect(a.key?.toString('utf8')).toBe(b.key?.toString('utf8'));
    expect(() => byRecordKey(a)).toThrow(/utf-8/i);
    expect(() => byRecordKey(b)).toThrow(/utf-8/i);
  });

  it('byEventId: the JSON value’s eventId; none, or a tombstone, has no key', () => {
    expect(byEventId(record({ value: Buffer.from('{"eventId":"e-1"}') }))).toBe('event:e-1');
    expect(byEventId(record({ value: Buffer.from('{"id":1}') }))).toBeUndefined();
    expect(byEventId(record({ value: null }))).toBeUndefined();
  });
});
