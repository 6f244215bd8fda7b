import type { Admin } from 'kafkajs';
import type { BrokerDriver, BrokerScenario } from '../broker.js';
import type { RunContext } from '../context.js';
import { prefillInChild } from '../prefill.js';
import { kafkaScenarios } from './scenarios.js';
import { createTopic, groupLag, kafkaClient, uniqueName } from './topic.js';

export function kafkaDriver(
  brokers: string,
  partitions: number,
  keyConcurrency: number,
  client: 'kafkajs' | 'platformatic' = 'kafkajs',
): BrokerDriver {
  const kafka = kafkaClient(brokers);
  const admin: Admin = kafka.admin();
  let connected = false;
  let target: { topic: string; groupId: string } | undefined;
  const current = () => {
    if (target === undefined) throw new Error('bench: Kafka topic not prepared');
    return target;
  };
  return {
    async prepare(tag: string, n: number) {
      await admin.connect();
      connected = true;
      const topic = await createTopic(admin, tag, partitions);
      await prefillInChild({ broker: 'kafka', brokers, topic, partitions, messages: n });
      target = { topic, groupId: uniqueName(`bench-${tag}`) };
    },
    run: (scenario: BrokerScenario, ctx: RunContext) =>
      kafkaScenarios[scenario](ctx, { kafka, keyConcurrency, client, brokers, ...current() }),
    remaining: () => groupLag(admin, current().groupId, current().topic),
    async close() {
      if (!connected) return;
      if (target !== undefined)
        await admin.deleteTopics({ topics: [target.topic] }).catch(() => undefined);
      await admin.disconnect();
    },
  };
}
