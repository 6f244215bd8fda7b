/**
 * `effectively-once/client`: the caller's side of idempotent HTTP, a `fetch` that sends
 * one Idempotency-Key on every attempt and retries what is safe to retry. No Postgres
 * and no Node-only API: it runs wherever `fetch` does.
 * @packageDocumentation
 * @module effectively-once/client
 */
export { idempotentFetch } from './idempotent-fetch.js';
export type { IdempotentFetchResult } from './idempotent-fetch.js';
export type { IdempotentFetchOptions, RetryEvent } from './options.js';
export { RetriesExhaustedError, UnreplayableBodyError } from './errors.js';
export type { GiveUpReason } from './errors.js';
export { decorrelatedJitter, isRetryableStatus, parseRetryAfter } from './retry-policy.js';
export type { BackoffBounds } from './retry-policy.js';
export { EffectivelyOnceError, ConfigurationError } from '../errors.js';
