import { Kafka, logLevel, type Admin, type Producer } from 'kafkajs';
import { DEAD_LETTER_HEADERS } from 'effectively-once/kafka';
import { sleep } from '../../src/sleep.js';
import { IDEMPOTENCY_HEADER, type ChaosBroker, type DeadLetter } from './broker-api.js';

const CHUNK = 500;

/**
 * A topic of `partitions` partitions and its dead-letter topic (`<topic>.dlq`, the
 * adapter's default). Records carry the idempotency key as a header and as the Kafka
 * key; the partition comes from the plan's random slot, so a duplicate send may land on
 * another partition than its original and be consumed by another worker at the same time.
 */
export async function createKafkaBroker(
  brokers: string[],
  runId: string,
  partitions: number,
): Promise<ChaosBroker> {
  const kafka = new Kafka({
    clientId: 'chaos-producer',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 3000,
    retry: { initialRetryTime: 200, maxRetryTime: 2000, retries: 5 },
  });
  const topic = `chaos-${runId}`;
  const deadLetterTopic = `${topic}.dlq`;
  const groupId = `chaos-${runId}`;

  // Admin and producer are recreated after a failure: the broker restarts mid-run.
  let admin: Admin | undefined;
  const withAdmin = async <T>(fn: (a: Admin) => Promise<T>): Promise<T> => {
    try {
      if (admin === undefined) {
        admin = kafka.admin();
        await admin.connect();
      }
      return await fn(admin);
    } catch (error) {
      const broken = admin;
      admin = undefined;
      await broken?.disconnect().catch(() => undefined);
      throw error;
    }
  };
  await withAdmin((a) =>
    a.createTopics({
      topics: [
        { topic, numPartitions: partitions },
        { topic: deadLetterTopic, numPartitions: 1 },
      ],
      waitForLeaders: true,
    }),
  );
  const topicEnd = async (name: string): Promise<Map<number, { low: number; high: number }>> =>
    withAdmin(
      async (a) =>
        new Map(
          (await a.fetchTopicOffsets(name)).map((p) => [
            p.partition,
            { low: Number(p.low), high: Number(p.high) },
          ]),
        ),
    );

  const deadLetterCount = async (): Promise<number> => {
    const ends = await topicEnd(deadLetterTopic);
    return [...ends.values()].reduce((sum, { low, high }) => sum + high - low, 0);
  };
  let producer: Producer | undefined;

  return {
    worker: { kind: 'kafka', brokers, topic, groupId },
    codedDeadLetters: true,

    async send(sends, signal) {
      let resent = 0;
      for (let i = 0; i < sends.length && !signal.aborted; i += CHUNK) {
        const messages = sends.slice(i, i + CHUNK).map((s) => ({
          key: s.key,
          value: s.body,
          partition: s.slot % partitions,
          headers: { [IDEMPOTENCY_HEADER]: s.key },
        }));
        for (let attempt = 1; !signal.aborted; attempt++) {
          try {
            if (producer === undefined) {
              producer = kafka.producer({ allowAutoTopicCreation: false });
              await producer.connect();
            }
            await producer.send({ topic, messages, acks: -1 });
            break;
          } catch {
            // The chunk may or may not be stored: sending it again is a producer retry, i.e. more duplicates.
            resent += messages.length;
            const broken = producer;
            producer = undefined;
            await broken?.disconnect().catch(() => undefined);
            await sleep(Math.min(200 * attempt, 2000));
          }
        }
      }
      return { resent };
    },

    async drained() {
      try {
        const ends = await topicEnd(topic);
        const committed = await withAdmin(
          async (a) => (await a.fetchOffsets({ groupId, topics: [topic] }))[0]?.partitions ?? [],
        );
        const at = new Map(committed.map((p) => [p.partition, Number(p.offset)]));
        return [...ends].every(
          ([partition, { low, high }]) => high === low || at.get(partition) === high,
        );
      } catch {
        return false;
      }
    },

    deadLetterCount,

    async deadLetters() {
      const count = await deadLetterCount();
      const letters: DeadLetter[] = [];
      if (count === 0) return letters;
      const reader = kafka.consumer({
        groupId: `${groupId}-dlq-reader`,
        sessionTimeout: 6000,
        heartbeatInterval: 500,
        maxWaitTimeInMs: 100,
      });
      await reader.connect();
      try {
        await reader.subscribe({ topics: [deadLetterTopic], fromBeginning: true });
        await reader.run({
          eachMessage: async ({ message }) => {
            const key = lastHeader(message.headers?.[IDEMPOTENCY_HEADER]);
            letters.push({
              key: key ?? `(no key: offset ${message.offset})`,
              code: lastHeader(message.headers?.[DEAD_LETTER_HEADERS.errorCode]),
            });
          },
        });
        const deadline = Date.now() + 60_000;
        while (letters.length < count && Date.now() < deadline) await sleep(100);
      } finally {
        await reader.disconnect();
      }
      return letters;
    },

    async close(cleanup) {
      await producer?.disconnect().catch(() => undefined);
      if (cleanup)
        await withAdmin((a) => a.deleteTopics({ topics: [topic, deadLetterTopic] })).catch(
          () => undefined,
        );
      await admin?.disconnect().catch(() => undefined);
    },
  };
}

function lastHeader(
  header: Buffer | string | Array<Buffer | string> | undefined,
): string | undefined {
  const value = Array.isArray(header) ? header[header.length - 1] : header;
  return value?.toString();
}
