import { EffectivelyOnceError, describe } from '../errors.js';

/**
 * The body cannot be sent byte-identically on every attempt: a `ReadableStream`, an
 * async iterable, or a `Request` input that carries its own (stream) body. It is
 * refused before the first attempt, so nothing was sent.
 */
export class UnreplayableBodyError extends EffectivelyOnceError {
  constructor(kind: string) {
    super(
      'EO_UNREPLAYABLE_BODY',
      `A ${kind} body cannot be replayed byte-identically on a retry; pass a string, bytes, ` +
        'URLSearchParams, Blob, FormData or options.json instead',
      { retryable: false, details: { kind } },
    );
  }
}

/** Why {@link idempotentFetch} stopped retrying. */
export type GiveUpReason = 'attempts' | 'deadline';

/**
 * Every attempt allowed (`attempts`, or the time left before `deadlineMs`) ended in a
 * retryable outcome: a network error, a per-attempt timeout, or a 408, 409, 429 or 5xx.
 * The operation may or may not have taken effect on the server; retrying later with
 * the same `key` (within the server's key lifetime) settles it without a double, which
 * is why `retryable` is true.
 */
export class RetriesExhaustedError extends EffectivelyOnceError {
  /** Which limit ended the retries. */
  readonly reason: GiveUpReason;
  /** The idempotency key every attempt carried. */
  readonly key: string;
  /** Attempts made, the first included. */
  readonly attempts: number;
  /** Status of the last response, when the last attempt got one. */
  readonly status: number | undefined;
  /**
   * The last response, body unread (read it for the server's problem details, or
   * cancel it), when the last attempt got one and the retries stopped right after it.
   * Undefined when a wait overran the deadline: its body was cancelled before the wait.
   */
  readonly response: Response | undefined;

  constructor(options: {
    reason: GiveUpReason;
    key: string;
    attempts: number;
    status?: number | undefined;
    response?: Response | undefined;
    cause?: unknown;
  }) {
    const { reason, key, attempts, response, cause } = options;
    const status = response?.status ?? options.status;
    const last = status !== undefined ? `HTTP ${status}` : describeFetchError(cause);
    super(
      'EO_RETRIES_EXHAUSTED',
      `Gave up after ${attempts} attempt${attempts === 1 ? '' : 's'} ` +
        `(${reason === 'attempts' ? 'attempts used up' : 'deadline reached'}); last: ${last}`,
      {
        retryable: true,
        cause,
        details: { key, attempts, reason, ...(status !== undefined ? { status } : {}) },
      },
    );
    this.reason = reason;
    this.key = key;
    this.attempts = attempts;
    this.status = status;
    this.response = response;
  }
}

/**
 * "fetch failed (ECONNRESET)": fetch hides the socket's code in `cause`. Duck-typed,
 * because fetch's errors may come from another realm (undici's, a test VM's) where
 * `instanceof Error` is false.
 */
export function describeFetchError(error: unknown): string {
  if (error === null || typeof error !== 'object' || !('message' in error)) return describe(error);
  const text = String(error.message);
  const cause = 'cause' in error ? error.cause : undefined;
  const code =
    cause !== null && typeof cause === 'object' && 'code' in cause ? cause.code : undefined;
  return typeof code === 'string' ? `${text} (${code})` : text;
}
