import { ConfigurationError } from '../errors.js';
import { LazyLinkedSignal } from '../signals.js';
import { sleep } from '../sleep.js';
import { freezeBody } from './body.js';
import { RetriesExhaustedError, UnreplayableBodyError, describeFetchError } from './errors.js';
import {
  formatKey,
  resolveKey,
  resolveOptions,
  type IdempotentFetchOptions,
  type ResolvedOptions,
} from './options.js';
import { isReplayed, isRetryableStatus, nextStep, parseRetryAfter } from './retry-policy.js';

/** What {@link idempotentFetch} resolves with. */
export interface IdempotentFetchResult {
  /**
   * The final response, body unread: a 2xx or 3xx, a 4xx other than 408, 409 and 429
   * (400, 422, 404 … are returned, never retried; check `response.ok`), or a replay of
   * any status.
   */
  response: Response;
  /** The idempotency key every attempt carried; persist it to retry the operation later. */
  key: string;
  /** Attempts made, the first included (1 when the first answer was final). */
  attempts: number;
  /**
   * Whether the server answered from its stored record (`Idempotent-Replayed: true`):
   * an earlier attempt of this operation had already been applied.
   */
  replayed: boolean;
}

/** One request, fixed for the whole operation. */
interface Operation {
  request: Request;
  /** Fields of `init` a Request does not keep (undici's `dispatcher`, say). */
  extra: Omit<RequestInit, 'body' | 'signal' | 'headers'>;
  body: Uint8Array | undefined;
  signal: AbortSignal | undefined;
  key: string;
  options: ResolvedOptions;
}

type Outcome = { response: Response } | { error: unknown; deadline: boolean };

/**
 * `fetch` for a non-idempotent call (a POST that charges, books, sends) made safe to
 * retry: one idempotency key for the logical operation, sent with the same bytes on
 * every attempt, so a server that stores keys (effectively-once/http, Stripe …) applies
 * it once however many attempts reach it.
 *
 * Retries network errors, per-attempt timeouts, 409 (the original is still running),
 * 429 and 5xx, waiting per `Retry-After` or else with decorrelated jitter, until
 * `attempts` or `deadlineMs` runs out. Every other response is final and returned,
 * 400 and 422 included, and so is a replay (`Idempotent-Replayed: true`), whatever its
 * status: it is the server's stored answer.
 *
 * @param input - the URL, or a `Request` without a body (its body would be a stream)
 * @param init - as for fetch; `init.body` is serialised once (streams are refused) and
 *   `init.signal` aborts the whole operation, waits included
 * @throws `ConfigurationError`: an option, the URL, a header or the method is invalid
 *   (nothing was sent)
 * @throws `UnreplayableBodyError`: the body is a stream (nothing was sent)
 * @throws `RetriesExhaustedError`: every allowed attempt failed retryably
 * @throws the signal's reason when `init.signal` aborts
 */
export async function idempotentFetch(
  input: string | URL | Request,
  init: RequestInit = {},
  options: IdempotentFetchOptions = {},
): Promise<IdempotentFetchResult> {
  const operation = await prepare(input, init, options);
  const { signal, key } = operation;
  const { attempts: maxAttempts, deadlineMs, backoff, onRetry } = operation.options;
  signal?.throwIfAborted();

  const startedAt = performance.now();
  const remaining = (): number => deadlineMs - (performance.now() - startedAt);
  let previousDelayMs = backoff.initialMs;
  let lastStatus: number | undefined;
  let lastError: unknown;
  for (let attempt = 1; ; attempt++) {
    // A wait ends before the deadline, but a busy event loop can overshoot it.
    if (attempt > 1 && remaining() <= 0)
      throw new RetriesExhaustedError({
        reason: 'deadline',
        key,
        attempts: attempt - 1,
        status: lastStatus,
        cause: lastError,
      });
    const outcome = await send(operation, remaining());
    signal?.throwIfAborted();
    const response = 'response' in outcome ? outcome.response : undefined;
    // A replay is the server's stored answer, whatever its status (a handler's own 409
    // "already exists", say): asking again can only replay it again.
    const replayed = response !== undefined && isReplayed(response.headers);
    if (response !== undefined && (replayed || !isRetryableStatus(response.status)))
      return { response, key, attempts: attempt, replayed };

    const error = 'error' in outcome ? outcome.error : undefined;
    const step =
      'error' in outcome && outcome.deadline
        ? ({ retry: false, reason: 'deadline' } as const)
        : nextStep({
            attempt,
            maxAttempts,
            remainingMs: remaining(),
            retryAfterMs: parseRetryAfter(response?.headers.get('retry-after') ?? null, Date.now()),
            previousDelayMs,
            backoff,
          });
    if (!step.retry)
      throw new RetriesExhaustedError({
        reason: step.reason,
        key,
        attempts: attempt,
        status: response?.status,
        response,
        cause: error,
      });
    // An unread body pins its connection; this response is not the answer.
    await response?.body?.cancel().catch(() => undefined);
    lastStatus = response?.status;
    lastError = error;
    onRetry?.({
      key,
      attempt,
      delayMs: step.delayMs,
      fromRetryAfter: step.fromRetryAfter,
      ...(response ? { status: response.status } : { error }),
    });
    await sleep(step.delayMs, signal);
    signal?.throwIfAborted();
    previousDelayMs = Math.max(backoff.initialMs, step.delayMs);
  }
}

/**
 * One attempt, bounded by `attemptTimeoutMs` or the time left, whichever is shorter
 * (`deadline` says it was the time left that ran out). Never rejects: the caller's
 * abort is left for the loop to raise.
 */
async function send(operation: Operation, remainingMs: number): Promise<Outcome> {
  const { attemptTimeoutMs, deadlineMs } = operation.options;
  const byDeadline = remainingMs <= attemptTimeoutMs;
  const timeoutMs = Math.max(1, Math.min(attemptTimeoutMs, remainingMs));
  const timeout = byDeadline
    ? new DOMException(`Deadline of ${deadlineMs} ms reached`, 'TimeoutError')
    : new DOMException(`Attempt exceeded ${timeoutMs} ms`, 'TimeoutError');
  const link = new LazyLinkedSignal([operation.signal]);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    link.abort(timeout);
  }, timeoutMs);
  try {
    const response = await fetch(operation.request, {
      ...operation.extra,
      body: operation.body,
      signal: link.signal,
    });
    return { response };
  } catch (error) {
    // After a Request was built, fetch rejects only with a network error or an abort.
    return { error, deadline: timedOut && byDeadline };
  } finally {
    clearTimeout(timer);
    // The returned body is the caller's to read; neither timeout applies to it.
    link.dispose();
  }
}

/** Validates everything and freezes the request, before anything is sent. */
async function prepare(
  input: string | URL | Request,
  init: RequestInit,
  options: IdempotentFetchOptions,
): Promise<Operation> {
  const resolved = resolveOptions(options);
  const hasJson = options.json !== undefined;
  if (input instanceof Request && input.body !== null && init.body == null && !hasJson)
    throw new UnreplayableBodyError('Request');
  const frozen = await freezeBody(init.body, options.json, hasJson);
  const { body: _body, signal, headers, ...extra } = init;
  let request: Request;
  try {
    request = new Request(input, { ...extra, ...(headers ? { headers } : {}) });
  } catch (error) {
    throw new ConfigurationError('input', `is not a valid request: ${describeFetchError(error)}`);
  }
  const key = resolveKey(options.key, request.headers.get(resolved.header), resolved.header);
  request.headers.set(resolved.header, formatKey(key, resolved.keyFormat));
  if (frozen.contentType !== null && !request.headers.has('content-type'))
    request.headers.set('content-type', frozen.contentType);
  resolved.propagate?.(request.headers);
  try {
    // Fails here, not as a "network error" on every attempt: a GET or HEAD with a body.
    new Request(request, { body: frozen.bytes });
  } catch (error) {
    throw new ConfigurationError('init.body', describeFetchError(error), {
      method: request.method,
    });
  }
  return {
    request,
    extra,
    body: frozen.bytes,
    signal: signal ?? (input instanceof Request ? input.signal : undefined),
    key,
    options: resolved,
  };
}
