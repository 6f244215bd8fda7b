/**
 * The SQS contenders in the worker process: sqs-consumer as its README shows it
 * (`handleMessage` does the work and returns the message, sqs-consumer deletes it), and
 * the same handler wrapped in `withDedup`. The crash point sits where both hand the
 * message back to sqs-consumer: the payment committed, the delete not yet sent.
 */
import type { Message } from '@aws-sdk/client-sqs';
import type pg from 'pg';
import { Consumer } from 'sqs-consumer';
import { withDedup } from 'effectively-once/sqs';
import type { ChannelEnv } from './channel.js';
import { ARM_ATTRIBUTE, KEY_ATTRIBUTE, type ConsumerContender } from './contenders.js';
import { applyPayment, type MessageCrashPoint } from './payments.js';
import { sqsClient } from './sqs-channel.js';

/** Starts the contender's sqs-consumer; resolves with its graceful stop. */
export async function startSqsWorker(
  contender: ConsumerContender,
  channel: Extract<ChannelEnv, { kind: 'sqs' }>,
  db: { pool: pg.Pool; schema: string },
  crash: MessageCrashPoint,
): Promise<() => Promise<void>> {
  const { queueUrl } = channel;
  const sqs = sqsClient(channel.endpoint);
  const reached = (message: Message): Promise<void> =>
    crash.reached(
      message.MessageAttributes?.[KEY_ATTRIBUTE]?.StringValue ?? '',
      message.MessageAttributes?.[ARM_ATTRIBUTE]?.StringValue === 'kill',
    );

  let handleMessage: (message: Message) => Promise<Message | undefined>;
  let stopWrapper = async (): Promise<void> => undefined;
  if (contender === 'sqs-consumer') {
    handleMessage = async (message) => {
      await applyPayment(db.pool, message.Body);
      await reached(message);
      return message;
    };
  } else {
    const dedup = withDedup((message, { tx }) => applyPayment(tx, message.Body), {
      name: 'payments',
      pool: db.pool,
      schema: db.schema,
      key: KEY_ATTRIBUTE,
      client: sqs,
      queueUrl,
    });
    await dedup.start();
    handleMessage = async (message) => {
      const handled = await dedup.handleMessage(message);
      await reached(message);
      return handled;
    };
    stopWrapper = () => dedup.stop();
  }

  const app = Consumer.create({
    queueUrl,
    sqs,
    handleMessage,
    messageAttributeNames: [KEY_ATTRIBUTE, ARM_ATTRIBUTE],
    messageSystemAttributeNames: ['All'],
    waitTimeSeconds: 1,
  });
  app.on('error', (error) => console.error(`sqs-consumer: ${error.message}`));
  app.on('processing_error', (error) => console.error(`not processed: ${error.message}`));
  const stopped = new Promise<void>((resolve) => app.once('stopped', () => resolve()));
  app.start();
  return async () => {
    app.stop();
    await stopped;
    await stopWrapper();
    sqs.destroy();
  };
}
