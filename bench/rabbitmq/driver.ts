import amqp, { type Channel, type ChannelModel } from 'amqplib';
import type { BrokerDriver, BrokerScenario } from '../broker.js';
import type { RunContext } from '../context.js';
import { prefillInChild } from '../prefill.js';
import { createQueue, queueDepth } from './queue.js';
import { rabbitmqScenarios } from './scenarios.js';

export function rabbitmqDriver(url: string): BrokerDriver {
  let connection: ChannelModel | undefined;
  let queue: string | undefined;
  const channels: Channel[] = [];
  const target = () => {
    if (connection === undefined || queue === undefined)
      throw new Error('bench: RabbitMQ queue not prepared');
    return { connection, queue, url, closeLater: (c: Channel) => channels.push(c) };
  };
  return {
    async prepare(tag: string, n: number) {
      connection = await amqp.connect(url);
      queue = await createQueue(connection, tag);
      await prefillInChild({ broker: 'rabbitmq', url, queue, messages: n });
    },
    run: (scenario: BrokerScenario, ctx: RunContext) => rabbitmqScenarios[scenario](ctx, target()),
    remaining: () => queueDepth(target().connection, target().queue),
    async close() {
      if (connection === undefined) return;
      for (const channel of channels.splice(0)) await channel.close().catch(() => undefined);
      if (queue !== undefined) {
        const channel = await connection.createChannel().catch(() => undefined);
        await channel?.deleteQueue(queue).catch(() => undefined);
        await channel?.close().catch(() => undefined);
      }
      await connection.close().catch(() => undefined);
    },
  };
}
