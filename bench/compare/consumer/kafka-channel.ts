import { Kafka, logLevel, type Admin, type Producer } from 'kafkajs';
import type { Channel } from './channel.js';
import { ARM_ATTRIBUTE, KEY_ATTRIBUTE } from './contenders.js';

/** A one-partition topic of its own (one order, one consumer) and the group that reads it. */
export async function kafkaChannel(brokers: string[], name: string): Promise<Channel> {
  const kafka = new Kafka({ clientId: 'compare-producer', brokers, logLevel: logLevel.NOTHING });
  const topic = name;
  const groupId = name;
  const admin: Admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
  const producer: Producer = kafka.producer();
  await producer.connect();
  return {
    env: { kind: 'kafka', brokers, topic, groupId },
    async send(key, body, armed) {
      await producer.send({
        topic,
        acks: -1,
        messages: [
          {
            key,
            value: body,
            headers: { [KEY_ATTRIBUTE]: key, ...(armed ? { [ARM_ATTRIBUTE]: 'kill' } : {}) },
          },
        ],
      });
    },
    async backlog() {
      const [ends, committed] = await Promise.all([
        admin.fetchTopicOffsets(topic),
        admin.fetchOffsets({ groupId, topics: [topic] }),
      ]);
      const done = new Map(
        (committed[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]),
      );
      // A group that never committed reports -1: nothing of the partition is settled.
      return ends.reduce(
        (sum, p) => sum + Number(p.high) - Math.max(Number(p.low), done.get(p.partition) ?? -1),
        0,
      );
    },
    async close() {
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
    },
  };
}
