import type { RunContext } from './context.js';
import type { BrokerName } from '../kit/services/private.js';

/** How reports and charts name each broker. */
export const BROKER_LABELS: Record<BrokerName, string> = {
  sqs: 'SQS',
  kafka: 'Kafka',
  rabbitmq: 'RabbitMQ',
};

export type BrokerScenario = 'a' | 'b' | 'c' | 'd' | 'f';

/** One broker's side of the bench: a fresh queue/topic per run, pre-filled, drained, checked. */
export interface BrokerDriver {
  /** Creates the queue/topic and sends ids 0..n-1, each stamped with its send time. */
  prepare(tag: string, n: number): Promise<void>;
  run(scenario: BrokerScenario, ctx: RunContext): Promise<void>;
  /** Messages not yet acked (SQS, RabbitMQ: left in the queue; Kafka: lag of the scenario's group). */
  remaining(): Promise<number>;
  /** Deletes the queue/topic and closes clients. */
  close(): Promise<void>;
}
