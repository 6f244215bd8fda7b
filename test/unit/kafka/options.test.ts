import { describe, expect, it } from '@jest/globals';
import { kafkaSource, type KafkaSourceOptions } from '../../../adapters/kafka/index.js';
import { resolveKafkaOptions } from '../../../adapters/kafka/options.js';
import { ConfigurationError } from '../../../src/errors.js';
import { FakeConsumer, FakeProducer } from '../../../kit/kafka-fakes.js';

const kafka = { consumer: () => new FakeConsumer(), producer: () => new FakeProducer() };
const base: KafkaSourceOptions = { kafka, groupId: 'g', topics: ['t'] };

function optionNamed(
  options: Partial<KafkaSourceOptions> | Record<string, unknown>,
): string | undefined {
  try {
    kafkaSource({ ...base, ...options });
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as ConfigurationError).details.option as string;
  }
}

describe('kafkaSource options', () => {
  it('fills in the documented defaults', () => {
    const config = resolveKafkaOptions(base);
    expect(config).toMatchObject({
      fromBeginning: false,
      idempotencyHeader: 'idempotency-key',
      parse: 'json',
      partitionConcurrency: Infinity,
      keyConcurrency: 1,
      maxPendingPerPartition: 1000,
      commitIntervalMs: 1000,
      redeliveryDelayMs: 1000,
      offsets: 'kafka',
      offsetsSchema: 'public',
      offsetsTable: 'eo_kafka_offsets',
    });
    expect(config.deadLetterTopic({ topic: 'orders' } as never)).toBe('orders.dlq');
  });

  it.each<[string, Partial<KafkaSourceOptions> | Record<string, unknown>]>([
    ['kafka', { kafka: undefined }],
    ['kafka', { consumer: new FakeConsumer() }],
    ['kafka', { kafka: {} }],
    ['producer', { kafka: undefined, consumer: new FakeConsumer() }],
    [
      'consumer',
      { kafka: undefined, consumer: { connect: () => undefined }, producer: new FakeProducer() },
    ],
    ['producer', { producer: {} }],
    ['groupId', { groupId: '' }],
    ['topics', { topics: [] }],
    ['topics', { topics: ['ok', ''] }],
    ['fromBeginning', { fromBeginning: 'yes' }],
    ['key', { key: '' }],
    ['key', { key: 7 as unknown as string }],
    ['parse', { parse: 'xml' }],
    // 'string', the pre-release name of 'text', is gone: nobody ran that version.
    ['parse', { parse: 'string' }],
    ['partitionConcurrency', { partitionConcurrency: 0 }],
    ['keyConcurrency', { keyConcurrency: 1.5 }],
    ['keyConcurrency', { keyConcurrency: 1001 }],
    ['maxPendingPerPartition', { maxPendingPerPartition: 0 }],
    ['commitIntervalMs', { commitIntervalMs: -1 }],
    ['redeliveryDelayMs', { redeliveryDelayMs: Number.NaN }],
    ['deadLetterTopic', { deadLetterTopic: '' }],
    ['offsets', { offsets: 'redis' }],
    ['pool', { offsets: 'postgres' }],
    ['offsetsSchema', { offsetsSchema: '' }],
    ['offsetsTable', { offsetsTable: 'x'.repeat(64) }],
  ])('rejects a bad %s at construction', (option, options) => {
    expect(optionNamed(options)).toBe(option);
  });

  it('accepts a consumer with a producer, and a dead-letter topic function', () => {
    expect(
      optionNamed({ kafka: undefined, consumer: new FakeConsumer(), producer: new FakeProducer() }),
    ).toBeUndefined();
    const config = resolveKafkaOptions({ ...base, deadLetterTopic: (r) => `dlq-${r.topic}` });
    expect(config.deadLetterTopic({ topic: 'a' } as never)).toBe('dlq-a');
  });

  it('creates the consumer from kafka with the group id and consumer settings', () => {
    const seen: unknown[] = [];
    kafkaSource({
      kafka: {
        consumer: (config) => (seen.push(config), new FakeConsumer()),
        producer: () => new FakeProducer(),
      },
      groupId: 'orders',
      topics: ['t'],
      consumerConfig: { sessionTimeout: 6000 },
    });
    expect(seen).toEqual([{ sessionTimeout: 6000, groupId: 'orders' }]);
  });
});
