/**
 * Issue 32: what the admission floor learns from a Kafka record. kafkajs decodes the
 * record batch's timestamp type onto each message's `batchContext`; only a
 * `LogAppendTime` (set by the broker) is trusted by default. A client that does not tell
 * (@platformatic/kafka) gives a producer's timestamp.
 */
import { describe, expect, it } from '@jest/globals';
import {
  recordSentAt,
  recordSentBy,
  toKafkaRecord,
  type KafkaRecord,
} from '../../../adapters/kafka/record.js';
import type { KafkaMessageLike } from '../../../adapters/kafka/client.js';

const batch = { topic: 't', partition: 0, messages: [] };

function record(timestamp: string, timestampType?: number): KafkaRecord {
  const message: KafkaMessageLike & { batchContext?: { timestampType?: number } } = {
    key: null,
    value: Buffer.from('{}'),
    offset: '7',
    timestamp,
    ...(timestampType === undefined ? {} : { batchContext: { timestampType } }),
  };
  return toKafkaRecord(batch, message);
}

describe('a Kafka record for the admission floor', () => {
  it('LogAppendTime (kafkajs type 1) is the broker’s; CreateTime (0) and unknown are the producer’s', () => {
    expect(record('1700000000000', 1)).toMatchObject({ timestampType: 'LogAppendTime' });
    expect(recordSentBy(record('1700000000000', 1))).toBe('broker');
    expect(record('1700000000000', 0)).toMatchObject({ timestampType: 'CreateTime' });
    expect(recordSentBy(record('1700000000000', 0))).toBe('producer');
    expect(record('1700000000000').timestampType).toBeUndefined();
    expect(recordSentBy(record('1700000000000'))).toBe('producer');
  });

  it('the timestamp as a Date; none for -1 (an old message format) or garbage', () => {
    expect(recordSentAt(record('1700000000000', 1))).toEqual(new Date(1_700_000_000_000));
    expect(recordSentAt(record('-1', 0))).toBeUndefined();
    expect(recordSentAt(record('soon', 0))).toBeUndefined();
  });
});
