import { ConfigurationError, InvalidKeyError } from '../../src/errors.js';
import { keyFromFunction, type KeyResult } from '../../src/keys.js';
import { OUTBOX_ID_HEADER } from '../../src/outbox/record.js';
import type { KafkaHeaders } from './client.js';
import type { KafkaRecord } from './record.js';

/** Header read for the dedup key unless a string `key` option names another. */
export const DEFAULT_IDEMPOTENCY_HEADER = 'idempotency-key';

/** Derives the dedup key of a record; `undefined` or `''` gets the record dead-lettered. */
export type KafkaKeyFunction = (record: KafkaRecord) => string | undefined;

/**
 * The `key` option of the Kafka adapters: the header holding the dedup key (a record
 * without it falls back to `eo-outbox-id`, then its position), or a function of the record.
 */
export type KafkaKey = string | KafkaKeyFunction;

/** Splits a `key` option (kafkaSource and exactlyOnceEachMessage) into a header or a function. */
export function kafkaKeyOption(key: unknown): {
  header: string;
  key: KafkaKeyFunction | undefined;
} {
  if (key === undefined) return { header: DEFAULT_IDEMPOTENCY_HEADER, key: undefined };
  if (typeof key === 'function')
    return { header: DEFAULT_IDEMPOTENCY_HEADER, key: key as KafkaKeyFunction };
  if (typeof key === 'string' && key !== '') return { header: key, key: undefined };
  throw new ConfigurationError('key', 'must be a header name or a function (record) => string');
}

/**
 * The text of header `name`: an exact match first, else a case-insensitive one (HTTP
 * habits carry over into Kafka headers). A repeated header yields its last value, as
 * Kafka's own `Headers.lastHeader` does. Buffers are read as UTF-8.
 */
export function headerText(headers: KafkaHeaders, name: string): string | undefined {
  const last = lastHeader(headers, name);
  if (last === undefined) return undefined;
  return typeof last === 'string' ? last : last.toString('utf8');
}

/** The last value of header `name`, as {@link headerText} finds it, undecoded. */
function lastHeader(headers: KafkaHeaders, name: string): Buffer | string | undefined {
  let value = headers[name];
  if (value === undefined) {
    const lower = name.toLowerCase();
    // for-in, not Object.entries: no array per call (two calls per record, most with no headers).
    for (const candidate in headers) {
      if (!Object.hasOwn(headers, candidate) || candidate.toLowerCase() !== lower) continue;
      const v = headers[candidate];
      if (v !== undefined) value = v;
    }
  }
  if (value === undefined) return undefined;
  return isArray(value) ? value[value.length - 1] : value;
}

/**
 * The default dedup key: the idempotency header when the record has one (an empty
 * header is a producer bug and yields `''`, which the runner dead-letters), else the
 * `eo-outbox-id` header of a record an outbox relay published (one key per outbox
 * row, however often the relay sent it), else `topic/partition/offset/timestamp`, which
 * dedups redeliveries of this very record only (the timestamp keeps a recreated topic's
 * records, whose offsets start at 0 again, from taking the old records' keys).
 *
 * @throws `InvalidKeyError` when the header's bytes are not UTF-8 (a binary id): read
 *   leniently, every invalid sequence would be U+FFFD and two different ids one key.
 *   The record is dead-lettered with it, as for a NUL key.
 */
export function defaultKafkaKey(record: KafkaRecord, header: string): string {
  return (
    keyHeaderText(record.headers, header) ??
    keyHeaderText(record.headers, OUTBOX_ID_HEADER) ??
    recordPositionKey(record)
  );
}

/**
 * `topic/partition/offset/timestamp`: the key of a record without a key header. The
 * offset alone names a position, which a topic deleted and recreated gives to another
 * record (its offsets start at 0 again, while the old records' claims are still in the
 * dedup window: the new record would be taken for a duplicate, or a mismatch). The
 * timestamp tells them apart: it is stored in the log with the record, so every
 * redelivery of the record carries the same one, while the recreated topic's record at
 * that offset was written at another millisecond (unless its producer chose the same
 * timestamp). Topic names cannot hold `/`, so the four fields read back unambiguously.
 */
function recordPositionKey(record: KafkaRecord): string {
  return `${record.topic}/${record.partition}/${record.offset}/${record.timestamp}`;
}

const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** {@link headerText}, refusing bytes that are not UTF-8 rather than replacing them. */
function keyHeaderText(headers: KafkaHeaders, name: string): string | undefined {
  const last = lastHeader(headers, name);
  if (last === undefined || typeof last === 'string') return last;
  const text = last.toString('utf8');
  // U+FFFD in the text is where a lenient decode may have replaced bytes: only then is
  // the header decoded again, strictly (a key that spells U+FFFD itself is rare).
  if (!text.includes('\ufffd')) return text;
  try {
    STRICT_UTF8.decode(last);
  } catch (cause) {
    throw new InvalidKeyError(
      `header "${name}" is not UTF-8: read as text, two different byte strings would be one key`,
      { header: name, bytes: last.subarray(0, 32).toString('hex') },
      cause,
    );
  }
  return text;
}

/**
 * A record's dedup key: `key(record)` when given (a throw dead-letters the record with
 * an `InvalidKeyError` saying what was thrown), else {@link defaultKafkaKey}.
 */
export function recordKey(
  record: KafkaRecord,
  key: KafkaKeyFunction | undefined,
  header: string,
): KeyResult {
  if (key === undefined) {
    try {
      return { key: defaultKafkaKey(record, header) };
    } catch (error) {
      if (!(error instanceof InvalidKeyError)) throw error;
      return { key: undefined, rejection: error };
    }
  }
  return keyFromFunction(key, record, {
    topic: record.topic,
    partition: record.partition,
    offset: record.offset,
  });
}

/**
 * The runner's ordering key. Without key concurrency a partition is one ordered
 * stream; with it, each Kafka key (base64, so any bytes are distinct) is one, and
 * key-less records share one stream.
 */
export function orderingKeyOf(record: KafkaRecord, perKey: boolean): string {
  const base = partitionOrderingKey(record.topic, record.partition);
  if (!perKey) return base;
  return record.key === null ? `${base}/null` : `${base}/k:${record.key.toString('base64')}`;
}

/** The ordering key of a partition's records without key concurrency. */
export function partitionOrderingKey(topic: string, partition: number): string {
  return `${topic}/${partition}`;
}

function isArray(
  value: NonNullable<KafkaHeaders[string]>,
): value is ReadonlyArray<Buffer | string> {
  return Array.isArray(value);
}
