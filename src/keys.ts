import { InvalidKeyError, describe } from './errors.js';

// The default `maxKeyLength` is the shared options' (one owner for every door).
export { DEFAULT_MAX_KEY_LENGTH } from './shared-options.js';

/**
 * Longest key in UTF-8 bytes, whatever `maxKeyLength` allows: a btree entry holds at
 * most 2704 bytes, shared by the key and the consumer name (at most 200 characters,
 * 800 bytes). A longer key would fail its claim on every attempt.
 */
export const MAX_KEY_BYTES = 1800;

// A lone surrogate has no UTF-8 form: node-postgres encodes it as U+FFFD, so two
// strings differing only in their lone surrogates would be one text in Postgres.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Whether a string is well-formed UTF-16 (no lone surrogate), so that it reaches
 * Postgres as itself: `String.prototype.isWellFormed`, which the ES2023 lib lacks.
 */
export function isWellFormedText(text: string): boolean {
  return !LONE_SURROGATE.test(text);
}

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
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_KEY_BYTES) {
    throw new InvalidKeyError(`${bytes} UTF-8 bytes exceeds the index limit of ${MAX_KEY_BYTES}`, {
      bytes,
      maxBytes: MAX_KEY_BYTES,
      prefix: key.slice(0, 64),
    });
  }
  if (key.includes('\u0000'))
    throw new InvalidKeyError('contains a NUL character, which Postgres text cannot store');
  if (!isWellFormedText(key)) throw new InvalidKeyError('contains a lone UTF-16 surrogate');
  return key;
}

/** A key, or the reason there is none (the runner dead-letters a delivery without a key). */
export interface KeyResult {
  key: string | undefined;
  rejection?: InvalidKeyError;
}

/**
 * Runs a user's key function. One policy for every source: a throw is a bug that
 * would fail every attempt the same way, so the delivery gets no key and an
 * `InvalidKeyError` naming what was thrown (dead-lettered with that reason).
 */
export function keyFromFunction<A>(
  fn: (arg: A) => string | undefined,
  arg: A,
  details: Record<string, unknown>,
): KeyResult {
  try {
    return { key: fn(arg) };
  } catch (error) {
    return {
      key: undefined,
      rejection: new InvalidKeyError(`the key function threw: ${describe(error)}`, details, error),
    };
  }
}
