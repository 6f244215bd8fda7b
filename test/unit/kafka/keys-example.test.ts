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
    expect(byRecordKey(record({}))).toBe('orders/2/41');
  });

  it('byEventId: the JSON value’s eventId; none, or a tombstone, has no key', () => {
    expect(byEventId(record({ value: Buffer.from('{"eventId":"e-1"}') }))).toBe('event:e-1');
    expect(byEventId(record({ value: Buffer.from('{"id":1}') }))).toBeUndefined();
    expect(byEventId(record({ value: null }))).toBeUndefined();
  });
});
