/**
 * Choosing the dedup key of a Kafka record. The default is the `idempotency-key`
 * header, else `topic/partition/offset/timestamp`, which only recognises redeliveries
 * of that very record: a producer that resends an operation without the header produces a new
 * record at a new offset, and it applies twice. When the producer puts its operation id
 * somewhere else, say so with `kafkaSource({ key })`:
 *
 *   kafkaSource({ kafka, groupId, topics, key: byRecordKey })
 */
import {
  DEFAULT_IDEMPOTENCY_HEADER,
  defaultKafkaKey,
  type KafkaKeyFunction,
} from 'effectively-once/kafka';

// #region record-key
/**
 * The Kafka record key (bytes, or null) as the dedup key, falling back to the default.
 * Only when the producer mints one record key per operation: a key per entity (every
 * event of order 42 keyed `order-42`) would make every event after the first a duplicate.
 * Decoded strictly: a key that is not UTF-8 throws (the record is dead-lettered), where
 * `toString('utf8')` would read two binary ids as one text. For binary keys, use
 * `record.key.toString('hex')` instead.
 */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
export const byRecordKey: KafkaKeyFunction = (record) =>
  record.key === null
    ? defaultKafkaKey(record, DEFAULT_IDEMPOTENCY_HEADER)
    : utf8.decode(record.key);
// #endregion

// #region event-id
/** An id inside the JSON value; a record without one is dead-lettered (`EO_INVALID_KEY`). */
export const byEventId: KafkaKeyFunction = (record) => {
  if (record.value === null) return undefined; // a tombstone carries no event
  const value = JSON.parse(record.value.toString('utf8')) as { eventId?: unknown };
  return typeof value.eventId === 'string' ? `event:${value.eventId}` : undefined;
};
// #endregion
