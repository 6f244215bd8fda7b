import type { ReplicaReport, ReplicaStatus } from '../replica/poller.js';
/**
 * The request side's public shapes (the {@link Idempotency} a createIdempotency call
 * returns, what a request's handling reports) and the adapters' way in; the
 * implementation is in idempotency.ts.
 */
import type { PoolClient } from 'pg';
import type { EffectivelyOnceError } from '../errors.js';
import type { Observable } from '../event-hub.js';
import type { IdempotencyContext, IdempotentHandler } from './context.js';
import type { FingerprintMode } from './fingerprint.js';
import type { PruneKeysOptions } from './store.js';
import type { WebhookHandler, WebhookOptions } from './webhooks.js';
import type { Flow, StepsRouteOptions } from '../steps/types.js';

/** Per-request settings that replace the endpoint's (adapters and webhooks use them). */
export interface RequestOverrides {
  /**
   * The scope, instead of calling `scope(request)`. On a webhook route it is the tenant,
   * composed with the sender's namespace (see {@link webhookScope}), not replaced by it.
   */
  scope?: string;
  /** The route, instead of calling `route(request)`. */
  route?: string;
  /**
   * The route's template as the framework matched it (`/orders/:id`), for telemetry
   * (the span's name, `http.route`); never the raw path. A route you chose (here or
   * by a `route` function) names the span instead. The Express and Fastify adapters
   * pass their matched route's.
   */
  routeTemplate?: string;
  /**
   * The key, instead of the header's: required whatever the method, validated like a
   * header key.
   */
  key?: string;
  /** The fingerprint mode, instead of the endpoint's. */
  fingerprint?: FingerprintMode;
  /**
   * Receive a webhook: verify the delivery, then key it on the sender's delivery id
   * (instead of `Idempotency-Key`), scoped by sender. See {@link WebhookOptions}.
   */
  webhook?: WebhookOptions;
  /**
   * When the handler must have returned, in ms since the epoch (a host with a hard end,
   * such as AWS Lambda's invocation deadline less a margin for the COMMIT): the wait for
   * the key and `handlerTimeoutMs` are cut to end by then, a handler still running is
   * timed out and rolled back, and a request whose deadline came before its handler
   * started is not run. Either is answered 503 (retry with the same key).
   */
  workDeadline?: number;
}

/** How a request was answered. */
export type Outcome =
  /** The handler ran and its response committed with the effect. */
  | 'executed'
  /** A stored response was replayed. */
  | 'replayed'
  /** The handler's response (5xx) rolled the effect back; sent unstored. */
  | 'rolled-back'
  /** Refused before anything ran (400, 409, 413, 422) or failed (5xx): a problem answer. */
  | 'refused'
  | 'failed';

/** What {@link Idempotency.execute} resolves with. */
export type Execution =
  | {
      kind: 'response';
      response: Response;
      outcome: Outcome;
      /**
       * Whether the body is a stream of unknown length (a body too large to keep, or one
       * marked `ctx.streamed`): send it as it comes rather than buffer it.
       */
      streaming: boolean;
    }
  /**
   * The user's code (handler, `scope`, `route`) threw; the transaction rolled back and
   * nothing was stored. `response` is the default answer (a problem+json 500); an
   * adapter hands `error` to its framework's error handling instead.
   */
  | { kind: 'threw'; error: unknown; response: Response; streaming: false };

/** Counters since the endpoint was created. */
export interface IdempotencyStats {
  /** Requests whose handler ran and committed. */
  executed: number;
  /** Requests answered with a stored response. */
  replayed: number;
  /** Handler runs rolled back (a throw, a response at or above `rollbackOn`). */
  rolledBack: number;
  /** Keys reused with another request (422) or on another endpoint. */
  mismatched: number;
  /** Retries that found the original still running past the wait (409). */
  busy: number;
  /** Every other problem answer (400, 413, 5xx) and handler throws. */
  failed: number;
  /** With `replicaSafe`: the watched standby as last polled (not a counter). */
  replica?: ReplicaStatus;
}

/** Payloads of an endpoint's events, one per counter of {@link IdempotencyStats}. */
export interface IdempotencyEvents {
  /** `replicaSafe`: the watched standby's state changed (see `ReplicaReport`). */
  replica: ReplicaReport;
  /** A handler ran and its response committed with the effect (before it is sent). */
  executed: { status: number };
  /** A stored response was replayed. */
  replayed: { status: number };
  /** A handler's response rolled the effect back (at or above `rollbackOn`); sent unstored. */
  'rolled-back': { status: number };
  /** A key came back with another request, or on another endpoint (422 by default). */
  mismatch: { status: number; error: EffectivelyOnceError };
  /** A retry found the original still running past the wait (409). */
  busy: { status: number; error: EffectivelyOnceError };
  /** Any other problem answer (400, 413, 5xx), or a handler that threw (`status` 500). */
  failed: { status: number; error: unknown };
  /** A background `retention` run deleted keys (runs that deleted none stay quiet). */
  pruned: { deleted: number; durationMs: number };
  /**
   * Database trouble outside a request (a background prune failed). With no listener it
   * is logged as before.
   */
  error: EffectivelyOnceError;
}

/** Name of an endpoint event. */
export type IdempotencyEventName = keyof IdempotencyEvents;

/** Options of {@link Idempotency.close}. */
export interface CloseOptions {
  /**
   * Grace period for requests in flight, in ms. After it their `ctx.signal` aborts and
   * what has not committed rolls back (answered 503): a handler still running (one that
   * ignores its signal) has its statement cancelled and its connection destroyed, so
   * `close()` resolves. Default 10 000.
   */
  timeoutMs?: number;
}

/**
 * Idempotency-Key handling on one Postgres table, for any number of endpoints. Create
 * one per process with {@link createIdempotency} and wrap each endpoint's handler.
 * Observed like every door: `on(event, listener)` / `off` (returning it) and `stats()`.
 * `Tx` is what handlers get as `ctx.tx`: a pg client by default, the data layer's own
 * transaction object with `dataLayer` (see DataLayer).
 */
export interface Idempotency<Tx = PoolClient> extends Observable<
  IdempotencyEvents,
  IdempotencyStats,
  Idempotency<Tx>
> {
  /**
   * A fetch-style endpoint (`(request) => Promise<Response>`): a Next.js route handler,
   * a Hono handler (`(c) => endpoint(c.req.raw)`), Deno.serve, Bun.serve …
   */
  handler(
    handler: IdempotentHandler<Tx>,
    overrides?: RequestOverrides,
  ): (request: Request) => Promise<Response>;
  /** Handles one request with `handler`; never rejects. */
  handle(
    request: Request,
    handler: IdempotentHandler<Tx>,
    overrides?: RequestOverrides,
  ): Promise<Response>;
  /**
   * A fetch-style webhook receiver: verifies each delivery (`options.verify`), then
   * claims its delivery id, applies `handler`'s effect once and stores its answer; a
   * redelivery gets that answer again.
   */
  webhook(
    options: WebhookOptions,
    handler: WebhookHandler<Tx>,
  ): (request: Request) => Promise<Response>;
  /**
   * A fetch-style endpoint that runs `flow` (see defineFlow) under the request's
   * Idempotency-Key: its input (default the JSON body) is recorded at the first claim,
   * each step's result as it completes; a retry resumes after the last recorded step
   * (once the first owner's lease expired; while it is live, it waits up to
   * `lockTimeoutMs`, then 409), a finished key replays its stored answer
   * (`Idempotent-Replayed: true`), and a key reused with another request is refused
   * (422). A transient step failure answers 503 + Retry-After, the recovery point kept.
   *
   * ```ts
   * const route = idempotency.steps(charge); // (request: Request) => Promise<Response>
   * ```
   */
  steps<I>(flow: Flow<I>, options?: StepsRouteOptions<I>): (request: Request) => Promise<Response>;
  /** As `handle`, but tells a throw of the user's code apart (for adapters). Never rejects. */
  execute(
    request: Request,
    handler: IdempotentHandler<Tx>,
    overrides?: RequestOverrides,
  ): Promise<Execution>;
  /** Applies the key table's pending migration steps (done before the first request unless `migrate: false`). */
  migrate(): Promise<void>;
  /**
   * Prunes now the keys whose own expiry has passed (any configuration's), or with
   * `olderThan` those older than it that have expired or have no expiry; returns how
   * many. A key is never deleted before its own expiry, and one claimed before expiries
   * were written (lifetime unknown) only by a prune with `olderThan`.
   */
  prune(
    options?: Partial<Pick<PruneKeysOptions, 'olderThan' | 'scope' | 'batchSize' | 'signal'>>,
  ): Promise<number>;
  /**
   * Stops pruning and refuses new requests (503), lets in-flight ones finish (aborting
   * them after the grace period), then resolves. Does not end the pool.
   */
  close(options?: CloseOptions): Promise<void>;
  /** `await using idempotency = createIdempotency(...)` closes it at scope exit. */
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * The adapters' way in (not part of the public API): the request's head as a bodyless
 * Request, and its body as the adapter already read it. Saves building a Request
 * around the bytes, reading them back out, and a copy of it for the handler, who
 * receives the head and reads `ctx.body` (`ctx.request` is still built if asked for).
 */
export const executeBuffered = Symbol('effectively-once.executeBuffered');

/**
 * What a request's handling reads of it: the head, and the web Request itself only
 * when something asks for it (a `scope` or `route` function, telemetry, `ctx.request`).
 * An adapter builds one from its framework's request (building a Request costs more
 * than the rest of the head).
 */
export interface RequestHead {
  readonly method: string;
  readonly url: string;
  /** A header's value, case-insensitively, as `Headers.get` gives it. */
  header(name: string): string | null;
  /** The web Request (bodyless for an adapter's buffered request), built once. */
  request(): Request;
}

/** The head of a web Request. */
export function headOf(request: Request): RequestHead {
  return {
    method: request.method,
    url: request.url,
    header: (name) => request.headers.get(name),
    request: () => request,
  };
}

/** An adapter's handler: it holds its own request and needs only the context. */
export type ContextHandler<Tx = PoolClient> = (
  ctx: IdempotencyContext<Tx>,
) => Response | Promise<Response>;

/** An {@link Idempotency} from createIdempotency, which adapters call through {@link executeBuffered}. */
export interface BufferedExecutor<Tx = PoolClient> {
  [executeBuffered](
    head: RequestHead,
    body: Uint8Array,
    handler: ContextHandler<Tx>,
    overrides?: RequestOverrides,
  ): Promise<Execution>;
}
