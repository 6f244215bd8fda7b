import {
  ClaimBusyError,
  CommitFailedError,
  CommitUnknownError,
  DatabaseError,
  type EffectivelyOnceError,
  HandlerTimeoutError,
  InvalidKeyError,
  ShutdownError,
  TransactionAbortedError,
  TransactionControlError,
} from '../errors.js';
import {
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyKeyReusedError,
  RequestTooLargeError,
  WebhookVerificationError,
} from './errors.js';

/** What shapes a problem answer. */
export interface ProblemSettings {
  problemTypeBase: string;
  mismatchStatus: number;
  retryAfterSeconds: number;
  header: string;
}

/**
 * An RFC 9457 problem+json answer for one of the library's errors. The body names the
 * error's stable `code`; messages of errors the handler threw are never included
 * (they may hold internals), only logged.
 */
export function problemResponse(error: EffectivelyOnceError, settings: ProblemSettings): Response {
  const { status, slug, title, retry } = classify(error, settings);
  const headers = new Headers({ 'content-type': 'application/problem+json' });
  if (retry) headers.set('retry-after', String(settings.retryAfterSeconds));
  const body = {
    type: `${settings.problemTypeBase}${slug}`,
    title,
    status,
    detail: error.message,
    code: error.code,
  };
  return new Response(JSON.stringify(body), { status, headers });
}

/** The answer for a handler that threw: the effect rolled back, nothing stored. */
export function handlerFailedResponse(settings: ProblemSettings): Response {
  const body = {
    type: `${settings.problemTypeBase}handler-failed`,
    title: 'The request failed and was rolled back',
    status: 500,
    detail: 'Nothing was applied; a retry with the same idempotency key runs afresh.',
    code: 'EO_HANDLER',
  };
  return new Response(JSON.stringify(body), {
    status: 500,
    headers: { 'content-type': 'application/problem+json' },
  });
}

interface Classified {
  status: number;
  slug: string;
  title: string;
  /** Whether the answer says when to retry (`Retry-After`). */
  retry: boolean;
}

function classify(error: EffectivelyOnceError, settings: ProblemSettings): Classified {
  if (error instanceof IdempotencyKeyMissingError)
    return {
      status: 400,
      slug: 'key-missing',
      title: `${error.field} is missing`,
      retry: false,
    };
  if (error instanceof IdempotencyKeyInvalidError || error instanceof InvalidKeyError)
    return {
      status: 400,
      slug: 'key-invalid',
      title: `${settings.header} is invalid`,
      retry: false,
    };
  if (error instanceof IdempotencyKeyReusedError)
    return {
      status: settings.mismatchStatus,
      slug: error.reason === 'endpoint' ? 'key-reused-on-another-endpoint' : 'key-reused',
      title: 'Idempotency key reused with another request',
      retry: false,
    };
  if (error instanceof ClaimBusyError)
    return {
      status: 409,
      slug: 'request-in-progress',
      title: 'A request with this idempotency key is still in progress',
      retry: true,
    };
  if (error instanceof RequestTooLargeError)
    return {
      status: 413,
      slug: 'request-too-large',
      title: 'Request body too large',
      retry: false,
    };
  if (error instanceof WebhookVerificationError)
    return {
      status: 401,
      slug: 'webhook-unverified',
      title: 'Delivery not verified',
      retry: false,
    };
  // Known rollbacks the handler caused (a statement failed and it went on, a deferred
  // constraint at COMMIT): a retry runs afresh, and likely fails the same way.
  if (
    error instanceof TransactionAbortedError ||
    error instanceof TransactionControlError ||
    error instanceof CommitFailedError
  )
    return { status: 500, slug: 'rolled-back', title: 'The request was rolled back', retry: false };
  if (
    error instanceof HandlerTimeoutError ||
    error instanceof CommitUnknownError ||
    error instanceof DatabaseError ||
    error instanceof ShutdownError
  )
    return {
      status: 503,
      slug: error instanceof CommitUnknownError ? 'outcome-unknown' : 'unavailable',
      title:
        error instanceof CommitUnknownError
          ? 'The outcome is unknown: retry with the same idempotency key'
          : 'The request was not applied: retry with the same idempotency key',
      retry: true,
    };
  return { status: 500, slug: 'internal', title: 'Internal error', retry: false };
}
