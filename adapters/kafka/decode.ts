import { BodyParseError } from '../../src/errors.js';
import type { KafkaRecord } from './record.js';

/**
 * How a record's value becomes the handler's message: `'json'` (default), `'text'`
 * (UTF-8 text, as `sqsSource`'s `'text'`), `'buffer'` (the bytes as they are) or your
 * own function. A tombstone (null value) always arrives as `null`.
 */
export type KafkaParse<T> = 'json' | 'text' | 'buffer' | ((record: KafkaRecord) => T);

/** A decoded body, or why it cannot be decoded (the runner then dead-letters the record). */
export type Decoded<T> =
  { body: T; rejection?: undefined } | { body: undefined; rejection: BodyParseError };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes `record.value` as `parse` says; never throws. */
export function decodeRecord<T>(record: KafkaRecord, parse: KafkaParse<T>): Decoded<T> {
  if (typeof parse === 'function') {
    try {
      return { body: parse(record) };
    } catch (cause) {
      return {
        body: undefined,
        rejection: new BodyParseError('the parse function threw', {
          cause,
          details: where(record),
        }),
      };
    }
  }
  const value = record.value;
  if (value === null) return { body: null as T };
  if (parse === 'buffer') return { body: value as T };
  let text: string;
  try {
    text = utf8.decode(value);
  } catch (cause) {
    return {
      body: undefined,
      rejection: new BodyParseError('value is not valid UTF-8', { cause, details: where(record) }),
    };
  }
  if (parse === 'text') return { body: text as T };
  try {
    return { body: JSON.parse(text) as T };
  } catch (cause) {
    return {
      body: undefined,
      rejection: new BodyParseError('value is not valid JSON', { cause, details: where(record) }),
    };
  }
}

/** Which record failed, for the error's details (built only on failure: decoding runs per record). */
function where(record: KafkaRecord): Record<string, unknown> {
  return { topic: record.topic, partition: record.partition, offset: record.offset };
}
