import type { Delivery } from '../../src/types.js';
import type { KafkaBatchLike, KafkaHeaders, KafkaMessageLike } from './client.js';

/** One Kafka record as the adapter hands it to the runner: `delivery.raw` of every Kafka delivery. */
export interface KafkaRecord {
  /** Topic of the record. */
  readonly topic: string;
  /** Partition of the record. */
  readonly partition: number;
  /** Int64 offset as a decimal string. */
  readonly offset: string;
  /**
   * The record key's bytes (`null` when the producer sent none). Not the dedup key: that
   * is the `idempotency-key` header, else `topic/partition/offset`, unless `key` says
   * otherwise.
   */
  readonly key: Buffer | null;
  /** The value bytes; `null` for a tombstone. */
  readonly value: Buffer | null;
  /** The record's headers (`{}` when it has none). */
  readonly headers: KafkaHeaders;
  /** Milliseconds since the epoch, as a decimal string. */
  readonly timestamp: string;
}

const records = new WeakSet<object>();

/** Builds the record of one message of a fetched batch. */
export function toKafkaRecord(batch: KafkaBatchLike, message: KafkaMessageLike): KafkaRecord {
  const record: KafkaRecord = {
    topic: batch.topic,
    partition: batch.partition,
    offset: message.offset,
    key: message.key,
    value: message.value,
    headers: message.headers ?? {},
    timestamp: message.timestamp,
  };
  records.add(record);
  return record;
}

/** Whether a delivery came from `kafkaSource` or `exactlyOnceEachMessage`. */
export function isKafkaDelivery(delivery: Pick<Delivery<unknown>, 'raw'>): boolean {
  const raw = delivery.raw;
  return typeof raw === 'object' && raw !== null && records.has(raw);
}

/**
 * The Kafka record behind a delivery made by this adapter (`ctx.delivery` in a
 * handler). Throws a `TypeError` for deliveries of other sources, as `sqsMessage`
 * does; {@link isKafkaDelivery} tells them apart.
 */
export function kafkaRecordOf(delivery: Pick<Delivery<unknown>, 'raw'>): KafkaRecord {
  if (!isKafkaDelivery(delivery))
    throw new TypeError('kafkaRecordOf: this delivery does not come from kafkaSource()');
  return delivery.raw as KafkaRecord;
}
