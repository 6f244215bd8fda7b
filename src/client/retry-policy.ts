/**
 * The pure half of idempotentFetch's retry loop: which outcomes are retried, how long
 * to wait, and when to stop. No I/O and no clock of its own, so it is unit-tested
 * exhaustively while the loop itself is tested against real servers.
 */
import type { GiveUpReason } from './errors.js';

/** Decorrelated-jitter bounds, in ms. */
export interface BackoffBounds {
  /** Shortest wait, and the first one. */
  initialMs: number;
  /** Longest wait. */
  maxMs: number;
}

/**
 * 408 (the server gave up waiting for the whole request: RFC 9110 §15.5.9, the client
 * may repeat it), 409 (the server's "the original is still in progress"), 429 and every
 * 5xx (the server rolled back, so the key is free again) are worth another attempt with
 * the same key, which makes a second arrival harmless whatever the first did. Every
 * other status is the server's final word: a 400 or 422 will not change by asking
 * again, and a replayed 2xx is the answer.
 */
export function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || (status >= 500 && status <= 599);
}

/**
 * `Retry-After` (RFC 9110 §10.2.3) in ms from `nowMs`: delay-seconds or an HTTP-date
 * (a date in the past means "now"). Undefined when absent or malformed, so the caller
 * falls back to its own backoff rather than trusting a value it cannot read.
 */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Only something shaped like a date: Date.parse also accepts "1.5" or "-3".
  if (!/[a-z]{3}/i.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/**
 * AWS's "decorrelated jitter": `min(cap, random_between(base, previous * 3))`. Each
 * wait grows from the previous one rather than from the attempt number, which spreads a
 * burst of clients that failed together better than exponential backoff with jitter.
 */
export function decorrelatedJitter(
  previousMs: number,
  bounds: BackoffBounds,
  random: () => number = Math.random,
): number {
  const upper = Math.max(bounds.initialMs, previousMs * 3);
  return Math.min(
    bounds.maxMs,
    Math.round(bounds.initialMs + random() * (upper - bounds.initialMs)),
  );
}

/** What to do after a retryable outcome. */
export type RetryStep =
  | { retry: true; delayMs: number; fromRetryAfter: boolean }
  | { retry: false; reason: GiveUpReason };

/**
 * The next step after attempt `attempt` (1-based) failed retryably. A `Retry-After`
 * wins over the backoff (the server knows when the original will be done); a wait that
 * would end at or past the deadline stops now instead of sleeping into a certain
 * failure.
 */
export function nextStep(input: {
  attempt: number;
  maxAttempts: number;
  remainingMs: number;
  retryAfterMs: number | undefined;
  previousDelayMs: number;
  backoff: BackoffBounds;
  random?: () => number;
}): RetryStep {
  if (input.attempt >= input.maxAttempts) return { retry: false, reason: 'attempts' };
  const fromRetryAfter = input.retryAfterMs !== undefined;
  const delayMs =
    input.retryAfterMs ?? decorrelatedJitter(input.previousDelayMs, input.backoff, input.random);
  if (delayMs >= input.remainingMs) return { retry: false, reason: 'deadline' };
  return { retry: true, delayMs, fromRetryAfter };
}

/**
 * Whether the server says this response replays a stored one: `Idempotent-Replayed:
 * true` (Stripe's spelling, and effectively-once/http's), or the structured-field
 * boolean `?1`.
 */
export function isReplayed(headers: Headers): boolean {
  const value = headers.get('idempotent-replayed')?.trim().toLowerCase();
  return value === 'true' || value === '?1';
}
