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

/**
 * The records this adapter makes, told apart by their class: a WeakSet of them cost
 * as much as building them (a profile of batch mode), and more garbage-collector work.
 */
class FetchedRecord implements KafkaRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: KafkaHeaders;
  readonly timestamp: string;

  constructor(batch: KafkaBatchLike, message: KafkaMessageLike) {
    this.topic = batch.topic;
    this.partition = batch.partition;
    this.offset = message.offset;
    this.key = message.key;
    this.value = message.value;
    this.headers = message.headers ?? {};
    this.timestamp = message.timestamp;
  }
}

/** Builds the record of one message of a fetched batch. */
export function toKafkaRecord(batch: KafkaBatchLike, message: KafkaMessageLike): KafkaRecord {
  return new FetchedRecord(batch, message);
}

/** Whether a delivery came from `kafkaSource` or `exactlyOnceEachMessage`. */
export function isKafkaDelivery(delivery: Pick<Delivery<unknown>, 'raw'>): boolean {
  return delivery.raw instanceof FetchedRecord;
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
