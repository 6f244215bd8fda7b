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

/**
 * The relay's `listen` connection, given explicitly, reaches Postgres through a
 * connection pooler (PgBouncer or the like), detected at `start()`: the pid of the server
 * session differs from the one the connection was given. LISTEN is session state; in
 * transaction mode the pooler runs it on a server connection it then hands to other
 * clients, and no notification reaches the relay. Give `listen` a direct connection to
 * Postgres, or `listen: false` to poll only. (With the default `listen: true`, the
 * pool's own settings, the relay polls instead and says so in one warn line.)
 */
export class ListenThroughPoolerError extends EffectivelyOnceError {
  constructor(details: { keyPid: number; backendPid: number }) {
    super(
      'EO_LISTEN_POOLED',
      'The outbox relay cannot LISTEN through a connection pooler (the server session is not ' +
        "the connection's own): give `listen` a direct connection to Postgres, or `listen: false` to poll only",
      { retryable: false, details },
    );
  }
}
