import { sqlstateOf } from './store/pg-errors.js';

/**
 * Every error this library raises is an {@link EffectivelyOnceError} with a stable
 * `code` (safe to switch on, unlike messages) and a `retryable` flag that tells the
 * runner whether another attempt could succeed. A duplicate is not an error: it is
 * the `duplicate` event.
 */
export class EffectivelyOnceError extends Error {
  /** Stable machine-readable identifier, e.g. `EO_INVALID_KEY`. */
  readonly code: string;
  /** Whether a later attempt of the same delivery may succeed. */
  readonly retryable: boolean;
  /** Free-form context: message key, queue URL, topic/partition/offset... */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(
    code: string,
    message: string,
    options: { retryable: boolean; cause?: unknown; details?: Record<string, unknown> },
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable;
    this.details = options.details ?? {};
  }
}

/** A method was called in a state that does not allow it (e.g. `start()` twice). */
export class StateError extends EffectivelyOnceError {
  constructor(problem: string, details: Record<string, unknown> = {}) {
    super('EO_STATE', problem, { retryable: false, details });
  }
}

/** An option was missing or out of range; raised at construction, never at run time. */
export class ConfigurationError extends EffectivelyOnceError {
  constructor(option: string, problem: string, details: Record<string, unknown> = {}) {
    super('EO_CONFIGURATION', `Invalid option "${option}": ${problem}`, {
      retryable: false,
      details: { option, ...details },
    });
  }
}

/** The delivery's dedup key is missing, empty, too long or not storable as text. */
export class InvalidKeyError extends EffectivelyOnceError {
  constructor(problem: string, details: Record<string, unknown> = {}, cause?: unknown) {
    super('EO_INVALID_KEY', `Invalid message key: ${problem}`, {
      retryable: false,
      details,
      cause,
    });
  }
}

/** The body could not be decoded (for example it is not JSON while JSON parsing is on). */
export class BodyParseError extends EffectivelyOnceError {
  constructor(
    problem: string,
    options: { cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super('EO_BODY_PARSE', `Message body could not be decoded: ${problem}`, {
      retryable: false,
      ...options,
    });
  }
}

/**
 * Another delivery of the same key holds the claim (its transaction is still open)
 * and did not finish within `lockTimeoutMs`. Retried later, never acked.
 */
export class ClaimBusyError extends EffectivelyOnceError {
  constructor(key: string, lockTimeoutMs: number, cause?: unknown) {
    super(
      'EO_CLAIM_BUSY',
      `Key "${truncate(key)}" is being processed by another delivery (waited ${lockTimeoutMs} ms)`,
      { retryable: true, cause, details: { key, lockTimeoutMs } },
    );
  }
}

/** The key was processed before with a different payload: a producer minted keys wrongly. */
export class PayloadMismatchError extends EffectivelyOnceError {
  constructor(key: string, storedHash: string, payloadHash: string) {
    super(
      'EO_PAYLOAD_MISMATCH',
      `Key "${truncate(key)}" was already processed with a different payload`,
      { retryable: false, details: { key, storedHash, payloadHash } },
    );
  }
}

/**
 * The admission floor refused the delivery: the broker says it was first sent longer ago
 * than the dedup window guarantees a claim is kept, so a claim of its key may have been
 * pruned and it cannot be told from a message never processed. Dead-lettered, never
 * applied blind.
 */
export class DeliveryExpiredError extends EffectivelyOnceError {
  constructor(key: string, firstSentAt: Date, ageMs: number, lifetimeMs: number) {
    super(
      'EO_DELIVERY_EXPIRED',
      `Key "${truncate(key)}" was first sent ${ageMs} ms ago, longer than the dedup window keeps a claim (${lifetimeMs} ms)`,
      {
        retryable: false,
        details: { key, firstSentAt: firstSentAt.toISOString(), ageMs, lifetimeMs },
      },
    );
  }
}

/** The handler did not settle within `handlerTimeoutMs`; its transaction is discarded. */
export class HandlerTimeoutError extends EffectivelyOnceError {
  constructor(key: string, timeoutMs: number) {
    super('EO_HANDLER_TIMEOUT', `Handler for key "${truncate(key)}" exceeded ${timeoutMs} ms`, {
      retryable: true,
      details: { key, timeoutMs },
    });
  }
}

/** The handler threw; wraps the thrown value so it always carries the key and attempt. */
export class HandlerError extends EffectivelyOnceError {
  constructor(key: string, attempt: number, cause: unknown) {
    super(
      'EO_HANDLER',
      `Handler failed for key "${truncate(key)}" (attempt ${attempt}): ${describe(cause)}`,
      {
        retryable: true,
        cause,
        details: { key, attempt },
      },
    );
  }
}

/**
 * COMMIT was sent but its outcome is unknown: the connection died while it was on the
 * wire. The delivery is not acked and no attempt is spent; the broker's redelivery
 * settles it either way thanks to the claim.
 */
export class CommitUnknownError extends EffectivelyOnceError {
  constructor(key: string, cause: unknown) {
    super('EO_COMMIT_UNKNOWN', `Outcome of COMMIT for key "${truncate(key)}" is unknown`, {
      retryable: true,
      cause,
      details: { key },
    });
  }
}

/**
 * The claim's transaction was rolled back before it could commit: a statement failed
 * inside it and the handler caught the error (Postgres then answers COMMIT with
 * ROLLBACK: `reason` `'aborted'`), the handler ended the transaction itself
 * (`'ended'`), the server ended the session because the transaction outlasted
 * `idle_in_transaction_session_timeout` (25P03) or `transaction_timeout` (25P04)
 * (`'timed-out'`), or the handler made it read-only (`SET TRANSACTION READ ONLY`) and a
 * write of the library's in it failed with 25006 (`'read-only'`). Nothing committed;
 * it spends an attempt like a handler failure, since the message's handling caused it.
 */
export class TransactionAbortedError extends EffectivelyOnceError {
  constructor(
    key: string,
    reason: 'aborted' | 'ended' | 'timed-out' | 'read-only',
    firstError: unknown,
    details: Record<string, unknown> = {},
  ) {
    const why =
      reason === 'aborted'
        ? `a statement failed inside it${firstError === undefined ? '' : ` (${describe(firstError)})`} and the handler went on`
        : reason === 'ended'
          ? 'the handler ended the transaction itself'
          : reason === 'timed-out'
            ? `the server ended its session, the transaction having outlasted a server timeout (${describe(firstError)})`
            : `the handler made it read-only, so the library's own write in it failed (${describe(firstError)})`;
    super(
      'EO_TX_ABORTED',
      `Transaction for key "${truncate(key)}" was rolled back: ${why}. Nothing was committed`,
      {
        retryable: true,
        cause: firstError,
        details: { key, reason, sqlstate: sqlstateOf(firstError), ...details },
      },
    );
  }
}

/**
 * The handler asked `ctx.tx` to end or control the claim's transaction (BEGIN, COMMIT,
 * ROLLBACK, ... or `release()`), or used `ctx.tx` after its transaction ended. The
 * runner owns the transaction; use SAVEPOINT / ROLLBACK TO SAVEPOINT to recover from a
 * failed statement.
 */
export class TransactionControlError extends EffectivelyOnceError {
  constructor(problem: string, details: Record<string, unknown> = {}) {
    super('EO_TX_CONTROL', `ctx.tx refused: ${problem}`, { retryable: true, details });
  }
}

/**
 * COMMIT was answered with an error while the connection stayed usable (a deferred
 * constraint violated at COMMIT, a serialization failure under SERIALIZABLE): the
 * outcome is known, the transaction rolled back. Spends an attempt.
 */
export class CommitFailedError extends EffectivelyOnceError {
  constructor(key: string, cause: unknown) {
    super(
      'EO_COMMIT_FAILED',
      `COMMIT for key "${truncate(key)}" failed and rolled back: ${describe(cause)}`,
      { retryable: true, cause, details: { key, sqlstate: sqlstateOf(cause) } },
    );
  }
}

/** A database operation outside the handler failed (connect, claim, rollback). */
export class DatabaseError extends EffectivelyOnceError {
  constructor(operation: string, cause: unknown, details: Record<string, unknown> = {}) {
    super('EO_DATABASE', `Database ${operation} failed: ${describe(cause)}`, {
      retryable: true,
      cause,
      details: { operation, ...details },
    });
  }
}

/**
 * A migration step the ledger (`effectively_once_migrations`) records as applied to a
 * table was applied from other statements than this version's step of that number (its
 * checksum differs): a step edited after its release, or a ledger row written by hand.
 * Nothing is re-run; the door does not start until someone looks.
 */
export class MigrationChecksumError extends EffectivelyOnceError {
  constructor(details: {
    family: string;
    schema: string;
    table: string;
    version: number;
    recorded: string;
    expected: string;
  }) {
    super(
      'EO_MIGRATION_CHECKSUM',
      `Migration step ${details.version} of the ${details.family} table "${details.schema}"."${details.table}" was applied from other statements than this version's (checksum ${details.recorded.slice(0, 12)}…, expected ${details.expected.slice(0, 12)}…); nothing was run`,
      { retryable: false, details },
    );
  }
}

/**
 * A door started with `migrate: false` found its table behind this version: migration
 * steps not applied (or no ledger at all). Apply them (`effectively-once migrate`, or
 * the SQL of `effectively-once migrate --print`) before starting it.
 */
export class MigrationsPendingError extends EffectivelyOnceError {
  constructor(details: { family: string; schema: string; table: string; pending: number[] }) {
    super(
      'EO_MIGRATIONS_PENDING',
      `The ${details.family} table "${details.schema}"."${details.table}" is behind this version: migration step${details.pending.length === 1 ? '' : 's'} ${details.pending.join(', ')} not applied, and migrate is false. Run \`effectively-once migrate\` (or apply \`effectively-once migrate --print\`), or start with migrate: true`,
      { retryable: false, details },
    );
  }
}

/** The broker refused or failed an operation (receive, delete, commit offsets, send to DLQ). */
export class BrokerError extends EffectivelyOnceError {
  constructor(
    operation: string,
    cause: unknown,
    options: { retryable?: boolean; details?: Record<string, unknown> } = {},
  ) {
    super('EO_BROKER', `Broker ${operation} failed: ${describe(cause)}`, {
      retryable: options.retryable ?? true,
      cause,
      details: { operation, ...options.details },
    });
  }
}

/** The consumer was stopped before this delivery could run; it is released, not acked. */
export class ShutdownError extends EffectivelyOnceError {
  constructor(key: string) {
    super('EO_SHUTDOWN', `Consumer stopped before key "${truncate(key)}" finished`, {
      retryable: true,
      details: { key },
    });
  }
}

/**
 * `replicaSafe` is on, and the library cannot see the standby it is to wait for: no row
 * in `pg_stat_replication` for the named standby, its positions NULL (the role lacks
 * `pg_monitor`/`pg_read_all_stats`), or, for `mode: 'synchronous-commit'`, an empty
 * `synchronous_standby_names`. Raised at start: the door refuses to run without it.
 */
export class ReplicaUnseenError extends EffectivelyOnceError {
  constructor(problem: string, details: Record<string, unknown> = {}) {
    super('EO_REPLICA_UNSEEN', `replicaSafe: the standby cannot be seen: ${problem}`, {
      retryable: false,
      details,
    });
  }
}

/**
 * A commit (or the committed row a duplicate found) could not be confirmed on the standby:
 * it fell behind past `maxWaitMs` under `onLag: 'hold'`, or the connection that watches it
 * was lost (the primary may have changed). Found as the cause of a
 * `CommitUnknownError`: the outward step is withheld and the redelivery (or the
 * client's retry) settles it.
 */
export class ReplicaUnconfirmedError extends EffectivelyOnceError {
  constructor(reason: 'lag' | 'disconnected', details: Record<string, unknown> = {}) {
    super(
      'EO_REPLICA_UNCONFIRMED',
      reason === 'lag'
        ? 'replicaSafe: the standby did not confirm the commit within maxWaitMs'
        : 'replicaSafe: the connection watching the standby was lost before it confirmed the commit',
      { retryable: true, details: { reason, ...details } },
    );
  }
}

/**
 * A routed door could not place a key in a database: the route threw, or named a
 * database that is not in `pool.databases`. This attempt fails (it spends an attempt;
 * the HTTP door answers 500); nothing was claimed anywhere.
 */
export class RoutingError extends EffectivelyOnceError {
  constructor(problem: string, details: Record<string, unknown> = {}, cause?: unknown) {
    super('EO_ROUTING', `routing: ${problem}`, { retryable: true, details, cause });
  }
}

/**
 * The route sent a key to another database than it did before (seen by this door, within
 * its `pool.rememberKeys` most recent keys): the rule that a key always routes to the same
 * database is broken, and the key may already be claimed in the other one. Nothing is
 * claimed; the attempt fails (a delivery ends dead-lettered, a request gets 500) rather
 * than applying the key a second time.
 */
export class RoutingViolationError extends EffectivelyOnceError {
  constructor(key: string, before: string, now: string, scope: string) {
    super(
      'EO_ROUTING_VIOLATION',
      `routing: key ${truncate(key)} was routed to database "${before}" before and to "${now}" now; a key must always route to the same database`,
      { retryable: false, details: { key, scope, before, now } },
    );
  }
}

/** Turns any thrown value into a short human-readable string. */
export function describe(value: unknown): string {
  if (value instanceof Error) return value.message;
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

function truncate(key: string, max = 80): string {
  return key.length <= max ? key : `${key.slice(0, max)}…(${key.length} chars)`;
}
