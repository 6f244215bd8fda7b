import type { Attributes } from '@opentelemetry/api';
import type { Delivery, MessagingInfo } from '../types.js';

/**
 * Attribute names: the OpenTelemetry messaging semantic conventions' where one exists,
 * `effectively_once.*` for what only this library knows.
 */
export const ATTR = {
  system: 'messaging.system',
  destination: 'messaging.destination.name',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  messageId: 'messaging.message.id',
  consumerGroup: 'messaging.consumer.group.name',
  partition: 'messaging.destination.partition.id',
  kafkaOffset: 'messaging.kafka.offset',
  batchCount: 'messaging.batch.message_count',
  consumer: 'effectively_once.consumer',
  key: 'effectively_once.key',
  attempt: 'effectively_once.attempt',
  outcome: 'effectively_once.outcome',
  /** `replicaSafe`: the watched standby's state (`streaming`, `lagging`, `missing`, `disconnected`). */
  replicaState: 'effectively_once.replica.state',
} as const;

/** What a delivery says about itself; `memory` for a source that does not describe its deliveries. */
export function messagingOf(delivery: Delivery<unknown>): MessagingInfo {
  try {
    const info = delivery.messaging?.();
    if (info !== undefined) return info;
  } catch {
    // A source's description failing must not fail the delivery: fall through.
  }
  return { system: 'unknown', destination: 'unknown', carrier: {} };
}

/** The messaging attributes of one message (delivery span, or a link of a batch span). */
export function messageAttributes(info: MessagingInfo): Attributes {
  const attributes: Attributes = {
    [ATTR.system]: info.system,
    [ATTR.destination]: info.destination,
  };
  if (info.messageId !== undefined) attributes[ATTR.messageId] = info.messageId;
  if (info.consumerGroup !== undefined) attributes[ATTR.consumerGroup] = info.consumerGroup;
  if (info.partition !== undefined) attributes[ATTR.partition] = String(info.partition);
  if (info.offset !== undefined) attributes[ATTR.kafkaOffset] = Number(info.offset);
  return attributes;
}

/** Attributes every span and metric of one consumer carries (low cardinality: metrics use them). */
export function consumerAttributes(consumer: string, info: MessagingInfo): Attributes {
  const attributes: Attributes = {
    [ATTR.consumer]: consumer,
    [ATTR.system]: info.system,
    [ATTR.destination]: info.destination,
    [ATTR.operationType]: 'process',
    [ATTR.operationName]: 'process',
  };
  if (info.consumerGroup !== undefined) attributes[ATTR.consumerGroup] = info.consumerGroup;
  return attributes;
}
