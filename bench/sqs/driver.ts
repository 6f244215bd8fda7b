import type { BrokerDriver, BrokerScenario } from '../broker.js';
import type { RunContext } from '../context.js';
import { prefillInChild } from '../prefill.js';
import { createQueue, deleteQueue, queueDepth, sqsClient } from './queue.js';
import { sqsScenarios } from './scenarios.js';

export function sqsDriver(endpoint: string): BrokerDriver {
  const client = sqsClient(endpoint);
  let queueUrl: string | undefined;
  const target = () => {
    if (queueUrl === undefined) throw new Error('bench: SQS queue not prepared');
    return { client, queueUrl };
  };
  return {
    async prepare(tag: string, n: number) {
      queueUrl = await createQueue(client, tag);
      await prefillInChild({ broker: 'sqs', endpoint, queueUrl, messages: n });
    },
    run: (scenario: BrokerScenario, ctx: RunContext) => sqsScenarios[scenario](ctx, target()),
    remaining: () => queueDepth(client, target().queueUrl),
    async close() {
      if (queueUrl !== undefined) await deleteQueue(client, queueUrl).catch(() => undefined);
      client.destroy();
    },
  };
}
