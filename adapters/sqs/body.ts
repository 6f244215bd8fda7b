import type { Message } from '@aws-sdk/client-sqs';
import { BodyParseError } from '../../src/errors.js';
import type { BodyParser } from './options.js';

/** A decoded body, or the reason it could not be decoded. */
export type DecodedBody<T> = { ok: true; body: T } | { ok: false; error: BodyParseError };

/** Decodes `message.Body` with the configured parser; never throws. */
export function decodeBody<T>(
  message: Message,
  parse: BodyParser<T>,
  queueUrl: string,
): DecodedBody<T> {
  const text = message.Body ?? '';
  const details = { queueUrl, messageId: message.MessageId };
  try {
    if (parse === 'text') return { ok: true, body: text as T };
    if (parse === 'json') return { ok: true, body: JSON.parse(text) as T };
    return { ok: true, body: parse(text) };
  } catch (cause) {
    const problem = parse === 'json' ? 'body is not valid JSON' : 'the parse function threw';
    return { ok: false, error: new BodyParseError(problem, { cause, details }) };
  }
}
