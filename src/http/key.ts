import { DEFAULT_MAX_KEY_LENGTH } from '../shared-options.js';
import { IdempotencyKeyInvalidError } from './errors.js';

// The IETF draft's and Stripe's limit: every door's default `maxKeyLength`.
export { DEFAULT_MAX_KEY_LENGTH };

// Printable ASCII, space included (a Structured Field String's alphabet).
const PRINTABLE = /^[\x20-\x7e]*$/;

/**
 * The key in an `Idempotency-Key` header value, accepting both forms in use: the raw
 * token Stripe and most clients send (`abc-123`), and the IETF httpapi draft's
 * Structured Field String (`"abc-123"`, RFC 8941 §3.3.3, `\"` and `\\` escaped). Both
 * spell the same key, so a client may switch forms between retries. Returns undefined
 * when the header is absent.
 *
 * @throws `IdempotencyKeyInvalidError`: empty, too long, not printable ASCII, or a
 *   quoted value that is not a valid String
 */
export function parseIdempotencyKey(
  value: string | null,
  header: string,
  maxLength: number = DEFAULT_MAX_KEY_LENGTH,
): string | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  const key = trimmed.startsWith('"') ? unquote(trimmed, header) : trimmed;
  if (key.length === 0) throw new IdempotencyKeyInvalidError(header, 'the key is empty');
  if (!PRINTABLE.test(key))
    throw new IdempotencyKeyInvalidError(header, 'the key must be printable ASCII');
  if (key.length > maxLength)
    throw new IdempotencyKeyInvalidError(
      header,
      `the key has ${key.length} characters, at most ${maxLength} are accepted`,
    );
  return key;
}

/** An RFC 8941 String: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE, nothing after. */
function unquote(text: string, header: string): string {
  let out = '';
  for (let i = 1; i < text.length; i++) {
    const c = text[i];
    if (c === '\\') {
      const next = text[i + 1];
      if (next !== '"' && next !== '\\')
        throw new IdempotencyKeyInvalidError(header, 'a quoted key may escape only " and \\');
      out += next;
      i++;
    } else if (c === '"') {
      if (i !== text.length - 1)
        throw new IdempotencyKeyInvalidError(
          header,
          'a quoted key must be one String, nothing after it',
        );
      return out;
    } else {
      out += c;
    }
  }
  throw new IdempotencyKeyInvalidError(header, 'the quoted key is not closed');
}
