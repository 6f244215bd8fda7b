import { randomBytes } from 'node:crypto';
import { Kafka, logLevel, type Admin } from 'kafkajs';
import { encodeMessage, newMessage } from '../message.js';

/** Header the effectively-once scenarios take the dedup key from (kafkaSource's default name). */
export const KEY_HEADER = 'idempotency-key';

export function kafkaClient(brokers: string): Kafka {
  return new Kafka({
    clientId: 'eo-bench',
    brokers: brokers.split(','),
    logLevel: logLevel.NOTHING,
  });
}

export const uniqueName = (prefix: string): string => `${prefix}-${randomBytes(4).toString('hex')}`;

/** A fresh topic per scenario run, so runs never see each other's records. */
export async function createTopic(admin: Admin, tag: string, partitions: number): Promise<string> {
  const topic = uniqueName(`bench-${tag}`);
  await admin.createTopics({
    topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
    waitForLeaders: true,
  });
  return topic;
}

/**
 * Produces ids 0..n-1 round-robin over the partitions, `perRequest` records per send,
 * one send at a time: only one chunk is ever in memory, whatever n is (a million
 * records is a thousand sends, about 15 s). `onProgress` hears every 10 %.
 */
export async function fillTopic(
  kafka: Kafka,
  topic: string,
  partitions: number,
  n: number,
  {
    perRequest = 1000,
    onProgress,
  }: { perRequest?: number; onProgress?: (sent: number) => void } = {},
): Promise<void> {
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  const tenth = Math.max(perRequest, Math.ceil(n / 10));
  await producer.connect();
  try {
    for (let start = 0; start < n; start += perRequest) {
      const sentAt = Date.now();
      const messages = [];
      for (let id = start; id < Math.min(n, start + perRequest); id++) {
        messages.push({
          partition: id % partitions,
          key: String(id),
          value: encodeMessage(newMessage(id, sentAt)),
          headers: { [KEY_HEADER]: `msg-${id}` },
        });
      }
      await producer.send({ topic, messages });
      const sent = Math.min(n, start + perRequest);
      if (Math.floor(sent / tenth) > Math.floor(start / tenth) || sent === n) onProgress?.(sent);
    }
  } finally {
    await producer.disconnect();
  }
}

/** Records of `topic` the group has not committed past (its lag); 0 once a scenario committed everything. */
export async function groupLag(admin: Admin, groupId: string, topic: string): Promise<number> {
  const [ends, committed] = await Promise.all([
    admin.fetchTopicOffsets(topic),
    admin.fetchOffsets({ groupId, topics: [topic] }),
  ]);
  const done = new Map(
    (committed[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]),
  );
  return ends.reduce((lag, p) => {
    const at = done.get(p.partition) ?? -1;
    return lag + Number(p.high) - (at < 0 ? Number(p.low) : at);
  }, 0);
}
