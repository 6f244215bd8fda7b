import { ConfigurationError } from '../errors.js';
import { intOption } from '../option-checks.js';
import type { BackoffBounds } from './retry-policy.js';

/** What {@link IdempotentFetchOptions.onRetry} is told before each wait. */
export interface RetryEvent {
  /** The operation's idempotency key (the same on every attempt). */
  key: string;
  /** The attempt that just failed, 1-based. */
  attempt: number;
  /** How long the call waits before the next attempt. */
  delayMs: number;
  /** Whether `delayMs` is the server's `Retry-After` rather than the backoff. */
  fromRetryAfter: boolean;
  /** The failed attempt's status (408, 409, 429, 5xx), when it got a response. */
  status?: number;
  /** The failed attempt's network error or timeout, when it got no response. */
  error?: unknown;
}

/** Options of {@link idempotentFetch}; every one is checked when it is called. */
export interface IdempotentFetchOptions {
  /**
   * The logical operation's key. Default: `crypto.randomUUID()`, minted once for this
   * call. Pass your own (persisted with the job, say) to retry the same operation
   * later, from another process, with the same key: 1 to 255 visible ASCII characters
   * without quotes or backslashes. A key already set in `init.headers` is adopted.
   */
  key?: string;
  /** The header that carries the key. Default `Idempotency-Key`. */
  header?: string;
  /**
   * How the key is written: `'raw'` (default; what Stripe and most APIs expect) or
   * `'quoted'`, the IETF httpapi draft's structured-field string (`"…"`).
   * effectively-once/http accepts both.
   */
  keyFormat?: 'raw' | 'quoted';
  /**
   * A JSON body, serialised once with `JSON.stringify`; Content-Type defaults to
   * `application/json`. Exclusive with `init.body`.
   */
  json?: unknown;
  /** Most attempts in all, the first included: 1 to 100. Default 5. */
  attempts?: number;
  /**
   * Total time budget from the call, waits included, in ms. Default 60 000. It must
   * stay below the server's key lifetime (24 h by default in effectively-once/http, and
   * at Stripe), so the last retry still finds the first attempt's record: at most
   * 86 399 999.
   */
  deadlineMs?: number;
  /**
   * Longest wait for one attempt's response headers, in ms (capped by the time left
   * before the deadline). Default 10 000. A timed-out attempt is retried with the
   * same key: the server may have applied it, and then it replays.
   */
  attemptTimeoutMs?: number;
  /** Decorrelated-jitter bounds in ms. Default `{ initialMs: 100, maxMs: 10_000 }`. */
  backoff?: { initialMs?: number; maxMs?: number };
  /**
   * Called before each wait, for logging or metrics. It cannot change the request:
   * the body and key are fixed for the operation. If it throws, no further attempt is
   * made and the call rejects with what it threw.
   */
  onRetry?: (event: RetryEvent) => void;
  /**
   * Adds trace context headers to the request, once, in the caller's context (every
   * attempt then carries the same parent): `propagateTraceContext` from
   * `effectively-once/otel` writes the active OpenTelemetry context's `traceparent`.
   */
  propagate?: (headers: Headers) => void;
}

/** Options with defaults applied, validated. */
export interface ResolvedOptions {
  header: string;
  keyFormat: 'raw' | 'quoted';
  attempts: number;
  deadlineMs: number;
  attemptTimeoutMs: number;
  backoff: BackoffBounds;
  onRetry: ((event: RetryEvent) => void) | undefined;
  propagate: ((headers: Headers) => void) | undefined;
}

/** Stripe prunes keys "after at least 24 hours"; effectively-once/http defaults to 24 h. */
export const DEFAULT_KEY_LIFETIME_MS = 24 * 3600_000;

/** What a key may hold: visible ASCII without `"` and `\`, 1 to 255 characters. */
const KEY = /^[\x21\x23-\x5b\x5d-\x7e]{1,255}$/;
/** An HTTP field name (RFC 9110 token). */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

export function resolveOptions(options: IdempotentFetchOptions): ResolvedOptions {
  if (options.header !== undefined && !TOKEN.test(options.header))
    throw new ConfigurationError('header', 'must be an HTTP header name', {
      value: options.header,
    });
  if (options.keyFormat !== undefined && !['raw', 'quoted'].includes(options.keyFormat))
    throw new ConfigurationError('keyFormat', "must be 'raw' or 'quoted'", {
      value: options.keyFormat,
    });
  if (options.deadlineMs !== undefined && options.deadlineMs >= DEFAULT_KEY_LIFETIME_MS)
    throw new ConfigurationError(
      'deadlineMs',
      "must stay below the server's key lifetime (24 h by default), so the last retry " +
        'still finds the first attempt',
      { value: options.deadlineMs },
    );
  if (options.onRetry !== undefined && typeof options.onRetry !== 'function')
    throw new ConfigurationError('onRetry', 'must be a function');
  if (options.propagate !== undefined && typeof options.propagate !== 'function')
    throw new ConfigurationError('propagate', 'must be a function (headers) => void');
  const initialMs = intOption('backoff.initialMs', options.backoff?.initialMs, 100, 1, 3_600_000);
  return {
    header: options.header ?? 'Idempotency-Key',
    keyFormat: options.keyFormat ?? 'raw',
    attempts: intOption('attempts', options.attempts, 5, 1, 100),
    deadlineMs: intOption('deadlineMs', options.deadlineMs, 60_000, 1, DEFAULT_KEY_LIFETIME_MS - 1),
    attemptTimeoutMs: intOption(
      'attemptTimeoutMs',
      options.attemptTimeoutMs,
      10_000,
      1,
      DEFAULT_KEY_LIFETIME_MS - 1,
    ),
    backoff: {
      initialMs,
      maxMs: intOption('backoff.maxMs', options.backoff?.maxMs, 10_000, initialMs, 3_600_000),
    },
    onRetry: options.onRetry,
    propagate: options.propagate,
  };
}

/**
 * The operation's key: the caller's (`options.key`, or one already in the headers),
 * else a fresh UUID. A header key arrives as written, so the draft's quoted form is
 * unwrapped first.
 */
export function resolveKey(
  optionKey: string | undefined,
  headerValue: string | null,
  header: string,
): string {
  const fromHeader = headerValue === null ? undefined : unquote(headerValue.trim());
  if (optionKey !== undefined && fromHeader !== undefined && optionKey !== fromHeader)
    throw new ConfigurationError('key', `differs from the ${header} header in init.headers`, {
      key: optionKey,
      headerValue,
    });
  const key = optionKey ?? fromHeader ?? crypto.randomUUID();
  if (typeof key !== 'string' || !KEY.test(key))
    throw new ConfigurationError(
      optionKey !== undefined ? 'key' : header,
      'must be 1 to 255 visible ASCII characters, without spaces, quotes or backslashes',
      { value: key },
    );
  return key;
}

/** The header value for `key`. */
export function formatKey(key: string, format: 'raw' | 'quoted'): string {
  return format === 'quoted' ? `"${key}"` : key;
}

function unquote(value: string): string {
  return value.length >= 2 && value.startsWith('"') && value.endsWith('"')
    ? value.slice(1, -1)
    : value;
}
