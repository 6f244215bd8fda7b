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
   * is the `idempotency-key` header, else `topic/partition/offset/timestamp`, unless
   * `key` says otherwise.
   */
  readonly key: Buffer | null;
  /** The value bytes; `null` for a tombstone. */
  readonly value: Buffer | null;
  /** The record's headers (`{}` when it has none). */
  readonly headers: KafkaHeaders;
  /** Milliseconds since the epoch, as a decimal string. */
  readonly timestamp: string;
  /**
   * Who set `timestamp`: `LogAppendTime` (the broker, when it appended the record: the
   * topic's `message.timestamp.type`), `CreateTime` (the producer). Undefined when the
   * client does not tell: `@platformatic/kafka` (whose `timestamp` is the producer's
   * even on a `LogAppendTime` topic).
   */
  readonly timestampType?: KafkaTimestampType | undefined;
}

/** How a record's timestamp was set (the record batch's timestamp-type attribute). */
export type KafkaTimestampType = 'CreateTime' | 'LogAppendTime';

/**
 * kafkajs decodes a record batch's timestamp type onto each message's `batchContext`
 * (0 CreateTime, 1 LogAppendTime), though its types do not declare it.
 */
interface KafkajsBatchContext {
  readonly batchContext?: { readonly timestampType?: unknown } | undefined;
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
  readonly timestampType: KafkaTimestampType | undefined;

  constructor(batch: KafkaBatchLike, message: KafkaMessageLike) {
    this.topic = batch.topic;
    this.partition = batch.partition;
    this.offset = message.offset;
    this.key = message.key;
    this.value = message.value;
    this.headers = message.headers ?? {};
    this.timestamp = message.timestamp;
    const type = (message as KafkajsBatchContext).batchContext?.timestampType;
    this.timestampType = type === 1 ? 'LogAppendTime' : type === 0 ? 'CreateTime' : undefined;
  }
}

/**
 * When the record was first sent, for the admission floor: its timestamp (kept on every
 * redelivery, a replay included). Undefined without one (-1: an old message format).
 */
export function recordSentAt(record: KafkaRecord): Date | undefined {
  const ms = Number(record.timestamp);
  return Number.isSafeInteger(ms) && ms > 0 ? new Date(ms) : undefined;
}

/**
 * Who set the record's timestamp: the broker only for `LogAppendTime`; a `CreateTime` is
 * the producer's clock (or any value it chose), and so is an unknown type.
 */
export function recordSentBy(record: KafkaRecord): 'broker' | 'producer' {
  return record.timestampType === 'LogAppendTime' ? 'broker' : 'producer';
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
