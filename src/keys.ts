import { InvalidKeyError } from './errors.js';

/** Default longest key, in characters (the same bound as Stripe's Idempotency-Key). */
export const DEFAULT_MAX_KEY_LENGTH = 255;

// Postgres rejects text that is not valid UTF-8, which a lone surrogate becomes.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Checks a dedup key before it reaches SQL. A bad key is the producer's bug: the
 * delivery is dead-lettered with this error instead of being retried forever.
 */
export function validateKey(key: string | undefined, maxLength: number): string {
  if (key === undefined || key === null) throw new InvalidKeyError('missing', {});
  if (typeof key !== 'string') throw new InvalidKeyError(`must be a string, got ${typeof key}`);
  if (key.length === 0) throw new InvalidKeyError('empty');
  if (key.length > maxLength) {
    throw new InvalidKeyError(`${key.length} characters exceeds the limit of ${maxLength}`, {
      length: key.length,
      maxLength,
      prefix: key.slice(0, 64),
    });
  }
  if (key.includes('\u0000'))
    throw new InvalidKeyError('contains a NUL character, which Postgres text cannot store');
  if (LONE_SURROGATE.test(key)) throw new InvalidKeyError('contains a lone UTF-16 surrogate');
  return key;
}
