/**
 * kafkaPublisher over the structural producer type, with fakes of both clients: a
 * kafkajs-shaped `Kafka`/`Producer`, and a `@platformatic/kafka` `Producer` through
 * platformaticProducer. What reaches each client, who makes the producer idempotent,
 * and who closes it. (The brokers themselves: test/integration/outbox/kafka.test.ts
 * for kafkajs, test/integration/kafka-platformatic/outbox-publisher.test.ts.)
 */
import { describe, expect, it } from '@jest/globals';
import {
  kafkaPublisher,
  type KafkaLike,
  type KafkaOutgoingMessage,
  type KafkaProducerConfig,
  type KafkaProducerLike,
} from 'effectively-once/kafka';
import {
  platformaticProducer,
  type PlatformaticMessageToProduce,
  type PlatformaticProducerLike,
} from 'effectively-once/kafka/platformatic';
import type { OutboxRecord } from 'effectively-once/outbox';

const record = (id: string, orderingKey: string | null): OutboxRecord => ({
  id,
  destination: 'events',
  orderingKey,
  payload: Buffer.from(`{"id":"${id}"}`),
  contentType: 'application/json',
  headers: { tenant: 't1' },
  attempts: 1,
  createdAt: new Date(0),
});

type Sent = { topic: string; acks?: number; messages: KafkaOutgoingMessage[] };

/** A kafkajs `Producer` stand-in. */
class FakeProducer implements KafkaProducerLike {
  readonly sent: Sent[] = [];
  connects = 0;
  disconnects = 0;
  async connect(): Promise<void> {
    this.connects++;
  }
  async disconnect(): Promise<void> {
    this.disconnects++;
  }
  async send(record: Sent): Promise<unknown> {
    this.sent.push(record);
    return [];
  }
}

/** A kafkajs `Kafka` stand-in that records the producer settings it was asked for. */
class FakeKafka {
  readonly configs: (KafkaProducerConfig | undefined)[] = [];
  readonly producers: FakeProducer[] = [];
  consumer(): never {
    throw new Error('the publisher makes no consumer');
  }
  producer(config?: KafkaProducerConfig): FakeProducer {
    this.configs.push(config);
    const p = new FakeProducer();
    this.producers.push(p);
    return p;
  }
}

/** A `@platformatic/kafka` `Producer` stand-in. */
class FakePlatformaticProducer implements PlatformaticProducerLike {
  readonly sent: { messages: PlatformaticMessageToProduce[]; acks?: number }[] = [];
  closes = 0;
  async send(options: { messages: PlatformaticMessageToProduce[]; acks?: number }) {
    this.sent.push(options);
    return {};
  }
  async close(): Promise<void> {
    this.closes++;
  }
}

const signal = new AbortController().signal;

describe('kafkaPublisher options', () => {
  it('takes exactly one of kafka and producer, and a topic', () => {
    const kafka: KafkaLike = new FakeKafka();
    const producer = new FakeProducer();
    expect(() => kafkaPublisher({ topic: 't' })).toThrow(/exactly one of `kafka`/);
    expect(() => kafkaPublisher({ kafka, producer, topic: 't' })).toThrow(/exactly one/);
    expect(() => kafkaPublisher({ kafka, topic: '' })).toThrow(/topic/);
    expect(() =>
      kafkaPublisher({ producer, producerConfig: { allowAutoTopicCreation: false }, topic: 't' }),
    ).toThrow(/applies to the producer made from `kafka`/);
    expect(() =>
      kafkaPublisher({ producer: {} as unknown as KafkaProducerLike, topic: 't' }),
    ).toThrow(/must be a kafkajs Producer or a platformaticProducer/);
  });
});

describe('kafkaPublisher over a kafkajs Kafka', () => {
  it('makes one idempotent producer, one request in flight, and closes it', async () => {
    const kafka = new FakeKafka();
    const publisher = kafkaPublisher({
      kafka,
      topic: 'events',
      producerConfig: { maxInFlightRequests: 5, allowAutoTopicCreation: false },
    });
    await publisher.publish([record('a', 'k1')], signal);
    await publisher.publish([record('b', null)], signal);
    expect(kafka.configs).toEqual([
      // Its own maxInFlightRequests wins over the default; idempotent always.
      { maxInFlightRequests: 5, allowAutoTopicCreation: false, idempotent: true },
    ]);
    const producer = kafka.producers[0]!;
    expect(producer.connects).toBe(1);
    expect(producer.sent).toEqual([
      {
        topic: 'events',
        acks: -1,
        messages: [
          {
            key: 'k1',
            value: Buffer.from('{"id":"a"}'),
            headers: { tenant: 't1', 'content-type': 'application/json', 'eo-outbox-id': 'a' },
          },
        ],
      },
      {
        topic: 'events',
        acks: -1,
        messages: [
          {
            key: null,
            value: Buffer.from('{"id":"b"}'),
            headers: { tenant: 't1', 'content-type': 'application/json', 'eo-outbox-id': 'b' },
          },
        ],
      },
    ]);
    await publisher.close();
    expect(producer.disconnects).toBe(1);
  });
});

describe('kafkaPublisher over a producer you give', () => {
  it('connects a kafkajs Producer once and leaves closing it to you', async () => {
    const producer = new FakeProducer();
    const publisher = kafkaPublisher({ producer, topic: 'events' });
    await publisher.publish([record('a', 'k1'), record('b', 'k1')], signal);
    expect(producer.connects).toBe(1);
    expect(producer.sent[0]!.messages.map((m) => m.key)).toEqual(['k1', 'k1']);
    await publisher.close();
    expect(producer.disconnects).toBe(0);
  });

  it('sends through a @platformatic/kafka Producer as bytes, the outbox id a header', async () => {
    const client = new FakePlatformaticProducer();
    const publisher = kafkaPublisher({ producer: platformaticProducer(client), topic: 'events' });
    await publisher.publish([record('a', 'k1'), record('b', null)], signal);
    expect(client.sent).toHaveLength(1);
    const { messages, acks } = client.sent[0]!;
    expect(acks).toBe(-1);
    expect(messages.map((m) => m.topic)).toEqual(['events', 'events']);
    expect(messages[0]!.key).toEqual(Buffer.from('k1'));
    // A row without an ordering key has no record key (a null key).
    expect(messages[1]!.key).toBeUndefined();
    expect(messages[0]!.value).toEqual(Buffer.from('{"id":"a"}'));
    const headers = (m: PlatformaticMessageToProduce) =>
      Object.fromEntries([...(m.headers ?? new Map())].map(([k, v]) => [`${k}`, `${v}`]));
    expect(headers(messages[0]!)).toEqual({
      tenant: 't1',
      'content-type': 'application/json',
      'eo-outbox-id': 'a',
    });
    expect(headers(messages[1]!)['eo-outbox-id']).toBe('b');
    await publisher.close();
    expect(client.closes).toBe(0);
  });

  it('fails the batch with a PublishError when the client refuses it', async () => {
    const client = new FakePlatformaticProducer();
    client.send = async () => {
      throw new Error('NOT_LEADER_OR_FOLLOWER');
    };
    const publisher = kafkaPublisher({ producer: platformaticProducer(client), topic: 'events' });
    await expect(publisher.publish([record('a', 'k1')], signal)).rejects.toMatchObject({
      code: 'EO_OUTBOX_PUBLISH',
      message: expect.stringContaining('Kafka send failed'),
    });
  });
});
