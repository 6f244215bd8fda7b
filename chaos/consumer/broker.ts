import { LAMBDA_MAX_RECEIVE_COUNT, type ChaosArgs } from './args.js';
import type { ChaosBroker } from './broker-api.js';

export type { ChaosBroker, DeadLetter } from './broker-api.js';

/** The run's broker; each kind is loaded only when used (kafkajs, the SQS SDK or amqplib). */
export async function createBroker(
  args: Pick<ChaosArgs, 'broker' | 'partitions'> & Partial<Pick<ChaosArgs, 'lambda'>>,
  endpoint: string,
  runId: string,
): Promise<ChaosBroker> {
  if (args.broker === 'sqs') {
    const { createSqsBroker } = await import('./sqs-broker.js');
    return createSqsBroker(
      endpoint,
      runId,
      args.lambda === true ? LAMBDA_MAX_RECEIVE_COUNT : undefined,
    );
  }
  if (args.broker === 'rabbitmq') {
    const { createRabbitmqBroker } = await import('./rabbitmq-broker.js');
    return createRabbitmqBroker(endpoint, runId);
  }
  const { createKafkaBroker } = await import('./kafka-broker.js');
  return createKafkaBroker(endpoint.split(','), runId, args.partitions);
}
