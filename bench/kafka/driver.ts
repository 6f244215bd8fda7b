import type { BrokerDriver } from '../broker.js';

/** Placeholder until kafkaSource lands: the Kafka side of the bench. */
export function kafkaDriver(_brokers: string, _partitions: number): BrokerDriver {
  throw new Error('bench: the Kafka driver is not written yet');
}
