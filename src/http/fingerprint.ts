import { createHash } from 'node:crypto';
import { isLosslessNumber, parse } from 'lossless-json';

/** What a request's fingerprint is computed from. */
export interface FingerprintInput {
  /** Upper-case method. */
  method: string;
  /** The endpoint (see `route`). */
  route: string;
  /** The query string, `?` included, or `''`. */
  search: string;
  /** The raw body bytes. */
  body: Uint8Array;
  /** The request's Content-Type, or null. */
  contentType: string | null;
}

/**
 * How a request is fingerprinted to tell a retry from a different request under the
 * same key: `'raw'` (default) hashes the body bytes as sent, so a retry must send the
 * same bytes (idempotentFetch does); `'json'` hashes a canonical form of a JSON body
 * ({@link canonicalJson}: keys sorted, no whitespace, numbers exactly as written), so a
 * client that re-serialises an equal object between retries still matches; a body with
 * no single canonical form (not JSON, or a key twice with different values) counts by
 * its raw bytes. A function returns the bytes or text to hash instead of the body
 * (method, route and query are always hashed with it).
 */
export type FingerprintMode = 'raw' | 'json' | ((input: FingerprintInput) => string | Uint8Array);

/**
 * sha256 over method, route, query and the body (or its canonical form). Each part is
 * length-prefixed, so no two different requests hash the same input.
 */
export function fingerprint(input: FingerprintInput, mode: FingerprintMode = 'raw'): Buffer {
  const hash = createHash('sha256');
  const part = (data: string | Uint8Array): void => {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    const length = Buffer.alloc(8);
    length.writeBigUInt64BE(BigInt(bytes.byteLength));
    hash.update(length);
    hash.update(bytes);
  };
  part(input.method);
  part(input.route);
  part(input.search);
  if (typeof mode === 'function') part(mode(input));
  else if (mode === 'json') part(canonicalJsonBody(input) ?? input.body);
  else part(input.body);
  return hash.digest();
}

/** The body as canonical JSON when it is JSON with one canonical form, else undefined (then the raw bytes count). */
function canonicalJsonBody(input: FingerprintInput): string | undefined {
  if (input.body.byteLength === 0 || !isJson(input.contentType)) return undefined;
  try {
    return canonicalJson(input.body);
  } catch {
    return undefined;
  }
}

function isJson(contentType: string | null): boolean {
  const type = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || type.endsWith('+json');
}

/**
 * A JSON text in canonical form: object keys sorted at every level, no whitespace,
 * strings re-escaped the one way `JSON.stringify` does, and every number exactly as
 * written (`9007199254740993` and `1e400` keep their digits, where a `JSON.parse` round
 * trip rounds or turns them into `null`; `1.0` and `1` stay different). Parsed by
 * lossless-json, which keeps number lexemes and refuses a key given twice with
 * different values. Throws a SyntaxError for text that is not JSON or has such a key:
 * it has no single meaning to canonicalise.
 */
export function canonicalJson(text: string | Uint8Array): string {
  const source = typeof text === 'string' ? text : Buffer.from(text).toString('utf8');
  let value: unknown;
  try {
    value = parse(source);
  } catch (cause) {
    throw new SyntaxError(`not canonical JSON: ${(cause as Error).message}`, { cause });
  }
  return serialise(value);
}

function serialise(value: unknown): string {
  if (isLosslessNumber(value)) return value.value;
  if (Array.isArray(value)) return `[${value.map(serialise).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${serialise((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  // Strings, booleans and null: lossless-json parsed them as JSON.parse does.
  return JSON.stringify(value);
}
