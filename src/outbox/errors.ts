import { EffectivelyOnceError } from '../errors.js';

/**
 * `enqueue` was given a message it cannot store (no destination, a payload JSON cannot
 * represent, headers that are not strings...). Thrown before anything is written, so
 * the caller's transaction is untouched and nothing is lost: fix the call.
 */
export class OutboxMessageError extends EffectivelyOnceError {
  constructor(field: string, problem: string, details: Record<string, unknown> = {}) {
    super('EO_OUTBOX_MESSAGE', `Invalid outbox message: "${field}" ${problem}`, {
      retryable: false,
      details: { field, ...details },
    });
  }
}

/**
 * A publisher refused one outbox row; recorded as the row's `last_error`. Retried with
 * backoff while `retryable` (the default); a non-retryable one (`retryable: false`: the
 * row itself is wrong, say an HTTP 400) parks the row at once.
 */
export class PublishError extends EffectivelyOnceError {
  constructor(
    destination: string,
    problem: string,
    options: { retryable?: boolean; cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super('EO_OUTBOX_PUBLISH', `Publish to "${destination}" failed: ${problem}`, {
      retryable: options.retryable ?? true,
      cause: options.cause,
      details: { destination, ...options.details },
    });
  }
}
