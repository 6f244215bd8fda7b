import { describe, expect, it } from '@jest/globals';
import { isKafkaDelivery, kafkaRecordOf } from '../../../adapters/kafka/index.js';
import { isSqsDelivery, sqsMessage } from '../../../adapters/sqs/index.js';
import { toKafkaRecord } from '../../../adapters/kafka/record.js';
import type { Delivery } from '../../../src/index.js';

const foreign = { raw: { anything: true } } as unknown as Delivery<unknown>;

describe('the adapters read a delivery back the same way', () => {
  it('sqsMessage and kafkaRecordOf both throw a TypeError for a delivery of another source', () => {
    expect(() => sqsMessage(foreign)).toThrow(TypeError);
    expect(() => kafkaRecordOf(foreign)).toThrow(TypeError);
    expect(isSqsDelivery(foreign)).toBe(false);
    expect(isKafkaDelivery(foreign)).toBe(false);
  });

  it('kafkaRecordOf returns the record of a Kafka delivery, and the guard says so', () => {
    const record = toKafkaRecord(
      { topic: 't', partition: 0, messages: [] },
      { key: null, value: Buffer.from('v'), offset: '3', timestamp: '0', headers: {} },
    );
    const delivery = { raw: record } as unknown as Delivery<unknown>;
    expect(isKafkaDelivery(delivery)).toBe(true);
    expect(kafkaRecordOf(delivery).offset).toBe('3');
  });
});
