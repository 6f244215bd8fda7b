import type { ConsumeMessage } from 'amqplib';
import { BodyParseError, InvalidKeyError } from '../../src/errors.js';
import { keyFromFunction, type KeyResult } from '../../src/keys.js';
import type { RabbitmqKeyFunction, RabbitmqParse } from './options.js';

/** A decoded body, or why it cannot be decoded (the runner then dead-letters the message). */
export type Decoded<T> =
  { body: T; rejection?: undefined } | { body: undefined; rejection: BodyParseError };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes `message.content` as `parse` says; never throws. */
export function decodeMessage<T>(
  message: ConsumeMessage,
  parse: RabbitmqParse<T>,
  queue: string,
): Decoded<T> {
  const details = { queue, deliveryTag: message.fields.deliveryTag };
  if (typeof parse === 'function') {
    try {
      return { body: parse(message) };
    } catch (cause) {
      return {
        body: undefined,
        rejection: new BodyParseError('the parse function threw', { cause, details }),
      };
    }
  }
  if (parse === 'buffer') return { body: message.content as T };
  let text: string;
  try {
    text = utf8.decode(message.content);
  } catch (cause) {
    return {
      body: undefined,
      rejection: new BodyParseError('body is not valid UTF-8', { cause, details }),
    };
  }
  if (parse === 'text') return { body: text as T };
  try {
    return { body: JSON.parse(text) as T };
  } catch (cause) {
    return {
      body: undefined,
      rejection: new BodyParseError('body is not valid JSON', { cause, details }),
    };
  }
}

/**
 * The dedup key: the function's answer, the named header's value (text, or a Buffer read
 * as UTF-8), else the `message-id` property. A message without one gets an
 * `InvalidKeyError` and goes the dead-letter way.
 */
export function messageKey(
  message: ConsumeMessage,
  options: { keyHeader: string | undefined; key: RabbitmqKeyFunction | undefined },
  queue: string,
): KeyResult {
  if (options.key !== undefined) return keyFromFunction(options.key, message, { queue });
  if (options.keyHeader !== undefined) {
    const value: unknown = message.properties.headers?.[options.keyHeader];
    const key =
      typeof value === 'string'
        ? value
        : Buffer.isBuffer(value)
          ? value.toString('utf8')
          : typeof value === 'number'
            ? String(value)
            : undefined;
    if (key === undefined || key === '')
      return {
        key: undefined,
        rejection: new InvalidKeyError(`header "${options.keyHeader}" is missing or empty`, {
          queue,
        }),
      };
    return { key };
  }
  const id: unknown = message.properties.messageId;
  if (typeof id === 'string' && id !== '') return { key: id };
  return {
    key: undefined,
    rejection: new InvalidKeyError('the message has no message-id property', { queue }),
  };
}
