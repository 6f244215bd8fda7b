import { createHash } from 'node:crypto';

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
 * (keys sorted, no whitespace), so a client that re-serialises an equal object between
 * retries still matches; a function returns the bytes or text to hash instead of the
 * body (method, route and query are always hashed with it).
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

/** The body as canonical JSON when it is JSON, else undefined (then the raw bytes count). */
function canonicalJsonBody(input: FingerprintInput): string | undefined {
  if (input.body.byteLength === 0 || !isJson(input.contentType)) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(input.body).toString('utf8'));
  } catch {
    return undefined;
  }
  return canonicalJson(value);
}

function isJson(contentType: string | null): boolean {
  const type = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || type.endsWith('+json');
}

/** JSON with object keys sorted at every level and no whitespace. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
