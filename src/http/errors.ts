import { EffectivelyOnceError } from '../errors.js';

/**
 * A request that must carry an idempotency key (its method is one of `methods`, or it
 * is a webhook delivery) came without one. Answered 400; nothing was claimed.
 */
export class IdempotencyKeyMissingError extends EffectivelyOnceError {
  /** Where the key should have been: `Idempotency-Key header`, `"id" field of the JSON body`. */
  readonly field: string;

  constructor(field: string) {
    super('EO_IDEMPOTENCY_KEY_MISSING', `The ${field} is required on this request`, {
      retryable: false,
      details: { field },
    });
    this.field = field;
  }
}

/**
 * The idempotency key is not one the server accepts: empty, longer than `maxKeyLength`,
 * not printable ASCII, or a quoted string that is not a valid structured-field String.
 * Answered 400; nothing was claimed.
 */
export class IdempotencyKeyInvalidError extends EffectivelyOnceError {
  constructor(header: string, problem: string) {
    super('EO_IDEMPOTENCY_KEY_INVALID', `The ${header} header is invalid: ${problem}`, {
      retryable: false,
      details: { header, problem },
    });
  }
}

/**
 * A webhook delivery's id is not one a key can be made of, exactly: not a non-empty
 * string of printable ASCII, nor an integer written as JSON writes one (a fraction, an
 * exponent, `-0`, a boolean, an object or an array). Read any other way, two different
 * deliveries could get one key (and the second would be answered as a redelivery,
 * never applied). Answered 400; nothing was claimed. A sender's SDK never sends such
 * an id: the request is not the delivery the receiver expects.
 */
export class WebhookDeliveryIdInvalidError extends EffectivelyOnceError {
  /** Where the id is: `"id" field of the JSON body`, `X-GitHub-Delivery header`. */
  readonly field: string;

  constructor(field: string, problem: string) {
    super('EO_WEBHOOK_ID_INVALID', `The ${field} is not a delivery id: ${problem}`, {
      retryable: false,
      details: { field, problem },
    });
    this.field = field;
  }
}

/** Why a stored key does not fit the request that reused it. */
export type MismatchReason = 'endpoint' | 'fingerprint';

/**
 * The key was used before by another request: on another endpoint (method and route),
 * or on this one with another body. Answered 422 by default (`mismatchStatus`); the
 * stored response is not replayed and nothing runs.
 */
export class IdempotencyKeyReusedError extends EffectivelyOnceError {
  /** `'endpoint'`: another method or route; `'fingerprint'`: another body on this one. */
  readonly reason: MismatchReason;

  constructor(key: string, reason: MismatchReason, details: Record<string, unknown> = {}) {
    super(
      'EO_IDEMPOTENCY_KEY_REUSED',
      reason === 'endpoint'
        ? 'This idempotency key was already used on another endpoint'
        : 'This idempotency key was already used with a different request body',
      { retryable: false, details: { key, reason, ...details } },
    );
    this.reason = reason;
  }
}

/** The request body is larger than `maxRequestBytes`. Answered 413; nothing was claimed. */
export class RequestTooLargeError extends EffectivelyOnceError {
  constructor(limit: number) {
    super('EO_REQUEST_TOO_LARGE', `The request body is larger than ${limit} bytes`, {
      retryable: false,
      details: { limit },
    });
  }
}

/**
 * The Request handed to an idempotent endpoint had its body read already: middleware
 * before it (a Hono `validator('json')` or `zValidator`, a middleware awaiting
 * `c.req.json()`) consumed it, so there is nothing to fingerprint or to hand the
 * handler. A server configuration error, answered 500 at the first request; nothing
 * was claimed. On Hono, pass `await honoRequest(c.req)` (from effectively-once/http),
 * which rebuilds the Request from the body Hono cached, instead of `c.req.raw`; a body
 * Hono holds only as a FormData (`c.req.formData()` read first) cannot be rebuilt as
 * it was sent, and comes back here: read forms with `c.req.parseBody()` or
 * `validator('form')`, which keep the bytes.
 */
export class RequestBodyConsumedError extends EffectivelyOnceError {
  constructor() {
    super(
      'EO_REQUEST_BODY_CONSUMED',
      'The request body was already read before the idempotent endpoint (a validator or ' +
        'middleware consumed it): hand the endpoint a Request with its body, on Hono ' +
        '`await honoRequest(c.req)` from effectively-once/http instead of `c.req.raw`; ' +
        'a form read with `c.req.formData()` first cannot be rebuilt as sent: read it ' +
        "with `c.req.parseBody()` or `validator('form')` instead",
      { retryable: false },
    );
  }
}

/**
 * A webhook delivery was refused by the receiver's `verify` function (a bad or missing
 * signature). Answered 401; nothing was claimed.
 */
export class WebhookVerificationError extends EffectivelyOnceError {
  constructor(sender: string) {
    super('EO_WEBHOOK_UNVERIFIED', `The ${sender} delivery failed verification`, {
      retryable: false,
      details: { sender },
    });
  }
}
