/**
 * The Kafka contenders in the worker process: a kafkajs consumer with an `eachMessage`
 * handler (kafkajs resolves the offset once it returns and commits it, autoCommit on),
 * and the same handler wrapped in `exactlyOnceEachMessage`. The crash point sits where
 * both return to kafkajs: the payment committed, the offset not yet committed.
 */
import { Kafka, logLevel, type EachMessagePayload } from 'kafkajs';
import type pg from 'pg';
import { exactlyOnceEachMessage } from 'effectively-once/kafka';
import type { ChannelEnv } from './channel.js';
import { ARM_ATTRIBUTE, KEY_ATTRIBUTE, type ConsumerContender } from './contenders.js';
import { applyPayment, type MessageCrashPoint } from './payments.js';

/**
 * Short sessions: the killed incarnation's membership must expire before the next one
 * is given the partition (the test brokers allow sessions from 1 s).
 */
const GROUP_TIMINGS = {
  sessionTimeout: 1500,
  rebalanceTimeout: 3000,
  heartbeatInterval: 300,
  maxWaitTimeInMs: 100,
};

/** Starts the contender's kafkajs consumer; resolves with its graceful stop. */
export async function startKafkaWorker(
  contender: ConsumerContender,
  channel: Extract<ChannelEnv, { kind: 'kafka' }>,
  db: { pool: pg.Pool; schema: string },
  crash: MessageCrashPoint,
): Promise<() => Promise<void>> {
  const kafka = new Kafka({
    clientId: 'compare-worker',
    brokers: channel.brokers,
    logLevel: logLevel.ERROR,
  });
  const reached = ({ message }: EachMessagePayload): Promise<void> =>
    crash.reached(
      message.headers?.[KEY_ATTRIBUTE]?.toString() ?? '',
      message.headers?.[ARM_ATTRIBUTE]?.toString() === 'kill',
    );

  let eachMessage: (payload: EachMessagePayload) => Promise<void>;
  let stopWrapper = async (): Promise<void> => undefined;
  if (contender === 'kafkajs') {
    eachMessage = async (payload) => {
      await applyPayment(db.pool, payload.message.value?.toString());
      await reached(payload);
    };
  } else {
    // Dead letters only: no record here is meant to fail.
    const producer = kafka.producer();
    await producer.connect();
    const eo = exactlyOnceEachMessage<EachMessagePayload>(
      ({ message }, { tx }) => applyPayment(tx, message.value?.toString()),
      {
        name: 'payments',
        pool: db.pool,
        schema: db.schema,
        producer,
        key: KEY_ATTRIBUTE,
      },
    );
    eachMessage = async (payload) => {
      await eo.eachMessage(payload);
      await reached(payload);
    };
    stopWrapper = async () => {
      await eo.stop();
      await producer.disconnect();
    };
  }

  const consumer = kafka.consumer({ groupId: channel.groupId, ...GROUP_TIMINGS });
  await consumer.connect();
  await consumer.subscribe({ topic: channel.topic, fromBeginning: true });
  await consumer.run({ eachMessage });
  return async () => {
    await consumer.disconnect();
    await stopWrapper();
  };
}
