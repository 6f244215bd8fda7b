import { isUnavailable } from '../store/pg-errors.js';
import {
  ClaimBusyError,
  CommitFailedError,
  CommitUnknownError,
  DatabaseError,
  type EffectivelyOnceError,
  HandlerError,
  HandlerTimeoutError,
  InvalidKeyError,
  ShutdownError,
  TransactionAbortedError,
  TransactionControlError,
} from '../errors.js';
import { sqlstateOf } from '../store/pg-errors.js';
import {
  IdempotencyKeyInvalidError,
  IdempotencyKeyMissingError,
  IdempotencyKeyReusedError,
  RequestBodyConsumedError,
  RequestTooLargeError,
  WebhookDeliveryIdInvalidError,
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
 * error's stable `code` and a `detail` fixed per problem type: an error's message may
 * hold a Postgres error's text (the offending value, a constraint's name), an address
 * or the handler's own words, so it goes to the logger only (the caller logs it).
 */
export function problemResponse(error: EffectivelyOnceError, settings: ProblemSettings): Response {
  const { status, slug, title, retry } = classify(error, settings);
  const headers = new Headers({ 'content-type': 'application/problem+json' });
  if (retry) headers.set('retry-after', String(settings.retryAfterSeconds));
  const body = {
    type: `${settings.problemTypeBase}${slug}`,
    title,
    status,
    detail: DETAILS[slug],
    code: error.code,
  };
  return new Response(JSON.stringify(body), { status, headers });
}

/** The answer for a handler that threw: the effect rolled back, nothing stored. */
/**
 * The answer to a request whose handler committed the claim's transaction itself
 * (`tx.query('…; COMMIT')`) and then failed: what it committed stays, so this is
 * stored with the key and replayed; it is never run again.
 */
export function failedAfterOwnCommitBody(settings: ProblemSettings): {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
} {
  const body = {
    type: `${settings.problemTypeBase}failed-after-own-commit`,
    title: 'The request failed after its handler committed',
    status: 500,
    detail:
      'The handler committed its transaction itself, then failed: what it committed stays, ' +
      'and a retry with the same idempotency key gets this answer again.',
    code: 'EO_TX_CONTROL',
  };
  return {
    status: 500,
    headers: { 'content-type': 'application/problem+json' },
    body: new TextEncoder().encode(JSON.stringify(body)),
  };
}

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

/** The problem types, by the slug of their `type` URI. */
type Slug = keyof typeof DETAILS;

/** The one `detail` of each problem type: what happened to the request, never why in the database's words. */
const DETAILS = {
  'key-missing': 'Nothing was applied: send the request with its idempotency key.',
  'key-invalid':
    'Nothing was applied: an idempotency key is printable ASCII, a token or a quoted string, within the length this server accepts.',
  'key-reused':
    'Nothing was applied: this idempotency key was used with a different request. Use a new key for a new request.',
  'key-reused-on-another-endpoint':
    'Nothing was applied: this idempotency key was used on another endpoint. Use a new key for a new request.',
  'request-in-progress':
    'The first request with this idempotency key has not finished: retry after the Retry-After delay.',
  'request-too-large':
    'Nothing was applied: the request body is larger than this endpoint accepts.',
  'webhook-unverified': 'Nothing was applied: the delivery did not pass verification.',
  'webhook-id-invalid':
    'Nothing was applied: a delivery id is a non-empty string of printable ASCII or an integer (no fraction, no exponent).',
  'body-consumed':
    'Nothing was applied: the server read the request body before its idempotent endpoint (a server configuration error).',
  'rolled-back':
    'Nothing was applied: the request failed inside its transaction, which rolled back.',
  unavailable:
    'Nothing was applied: retry with the same idempotency key after the Retry-After delay.',
  'outcome-unknown':
    'The connection was lost while the request committed: retry with the same idempotency key to learn the outcome.',
  internal: 'The request could not be answered.',
} as const;

/**
 * Whether an error, or one of its causes, is a database server saying it cannot take
 * the request now rather than the request being wrong: a node that is read-only (a
 * standby, or a primary demoted under us: 25006), shutting down (57P0x), out of
 * connections, or a connection exception. Only answers the server sent count: a
 * downstream service's ECONNREFUSED thrown by a handler is the handler's failure.
 */
export function databaseUnavailable(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 8 && typeof current === 'object' && current !== null; depth++) {
    const code = sqlstateOf(current);
    if (code !== undefined && (code === READ_ONLY_TRANSACTION || isUnavailable(current)))
      return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/** SQLSTATE `read_only_sql_transaction`: what a standby answers to a write. */
const READ_ONLY_TRANSACTION = '25006';

interface Classified {
  status: number;
  slug: Slug;
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
  if (error instanceof WebhookDeliveryIdInvalidError)
    return {
      status: 400,
      slug: 'webhook-id-invalid',
      title: `${error.field} is not a delivery id`,
      retry: false,
    };
  if (error instanceof RequestBodyConsumedError)
    return {
      status: 500,
      slug: 'body-consumed',
      title: 'The request body was read before the idempotent endpoint',
      retry: false,
    };
  if (error instanceof WebhookVerificationError)
    return {
      status: 401,
      slug: 'webhook-unverified',
      title: 'Delivery not verified',
      retry: false,
    };
  // The handler's connection died under it (a problem answer carries a HandlerError
  // only then), or what rolled back was the database refusing writes (25006): not the
  // request's fault, and a retry may well succeed.
  if (
    error instanceof HandlerError ||
    ((error instanceof TransactionAbortedError || error instanceof CommitFailedError) &&
      databaseUnavailable(error.cause))
  )
    return unavailable;
  // Known rollbacks the handler caused (a statement failed and it went on, a deferred
  // constraint at COMMIT): a retry runs afresh, and likely fails the same way.
  if (
    error instanceof TransactionAbortedError ||
    error instanceof TransactionControlError ||
    error instanceof CommitFailedError
  )
    return { status: 500, slug: 'rolled-back', title: 'The request was rolled back', retry: false };
  if (error instanceof CommitUnknownError)
    return {
      status: 503,
      slug: 'outcome-unknown',
      title: 'The outcome is unknown: retry with the same idempotency key',
      retry: true,
    };
  if (
    error instanceof HandlerTimeoutError ||
    error instanceof DatabaseError ||
    error instanceof ShutdownError
  )
    return unavailable;
  return { status: 500, slug: 'internal', title: 'Internal error', retry: false };
}

const unavailable: Classified = {
  status: 503,
  slug: 'unavailable',
  title: 'The request was not applied: retry with the same idempotency key',
  retry: true,
};
