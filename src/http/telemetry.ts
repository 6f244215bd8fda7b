/**
 * How telemetry sees the end of a request: `executed`, `replayed`, `rolled-back`,
 * `in-progress` (409: the original still runs), `refused` (another 4xx: no key, a
 * reused key, too large) or `failed` (5xx, a handler that threw).
 */
export type HttpTelemetryOutcome =
  'executed' | 'replayed' | 'rolled-back' | 'in-progress' | 'refused' | 'failed';

/** What is known of a request once its key was read and its route resolved. */
export interface HttpRequestIdentity {
  /** The idempotency key, or undefined for an unkeyed request of a method that does not need one. */
  key: string | undefined;
  /** The route the key is bound to (by default the URL's path, ids and all). */
  route: string;
  /**
   * The route's template (`/orders/:id`), when one is known: an adapter's route
   * (`RequestOverrides.routeTemplate`), or what a `route` function chose. Undefined
   * when the route is only the URL's path, whose cardinality has no bound.
   */
  template?: string;
}

/** How a request ended, for {@link HttpRequestScope.end}. */
export interface HttpRequestEnd {
  /** How it was answered. */
  outcome: HttpTelemetryOutcome;
  /** The status answered. */
  status: number;
  /** The error behind a `refused` or `failed` outcome. */
  error?: unknown;
}

/** One request being followed; ended exactly once. */
export interface HttpRequestScope {
  /** Runs the request's handling (claim, handler, commit) with this scope's context active. */
  run<R>(fn: () => R): R;
  /** The key and route, once read (not called for a request refused before that). */
  identified(identity: HttpRequestIdentity): void;
  /** The request was answered. */
  end(result: HttpRequestEnd): void;
}

/**
 * Hooks through which `createIdempotency` reports each request, for tracing and metrics.
 * The HTTP side depends on no telemetry library: `otelIdempotencyTelemetry()` from
 * `effectively-once/otel` implements them with OpenTelemetry. A hook that throws is
 * logged and ignored (the request goes on).
 */
export interface IdempotencyTelemetry {
  /** A request arrived. */
  startRequest(request: Request): HttpRequestScope;
}
