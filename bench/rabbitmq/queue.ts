import { randomBytes } from 'node:crypto';
import amqp, { type ChannelModel } from 'amqplib';
import { encodeMessage, newMessage } from '../message.js';

/** Messages published between two waits for their confirms while filling. */
const CONFIRM_EVERY = 1000;

/**
 * A fresh durable quorum queue per scenario run, so runs never see each other's
 * messages (quorum: RabbitMQ's replicated, crash-safe queue type, what a deployment that
 * cares about its messages declares).
 */
export async function createQueue(connection: ChannelModel, tag: string): Promise<string> {
  const name = `bench-${tag}-${randomBytes(4).toString('hex')}`;
  const channel = await connection.createChannel();
  try {
    await channel.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  } finally {
    await channel.close();
  }
  return name;
}

/**
 * Publishes ids 0..n-1, persistent, `message-id` = `msg-<id>` (the source's default
 * key), with publisher confirms, waiting for them every {@link CONFIRM_EVERY} messages.
 */
export async function fillQueue(url: string, queue: string, n: number): Promise<void> {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createConfirmChannel();
    for (let id = 0; id < n; id++) {
      channel.publish('', queue, Buffer.from(encodeMessage(newMessage(id, Date.now()))), {
        persistent: true,
        messageId: `msg-${id}`,
        contentType: 'application/json',
      });
      if ((id + 1) % CONFIRM_EVERY === 0) await channel.waitForConfirms();
    }
    await channel.waitForConfirms();
    await channel.close();
  } finally {
    await connection.close();
  }
}

/**
 * Messages ready in the queue: 0 once a scenario acked everything. (AMQP's
 * queue.declare-ok counts ready messages only; the scenarios' channels stay open until
 * the driver closes, so an unacked message would show as never done in the drain.)
 */
export async function queueDepth(connection: ChannelModel, queue: string): Promise<number> {
  const channel = await connection.createChannel();
  try {
    return (await channel.checkQueue(queue)).messageCount;
  } finally {
    await channel.close();
  }
}
