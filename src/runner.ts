import type { PoolClient } from 'pg';
import type { ConsumerConfig } from './config.js';
import type { DatabaseHealth } from './db-health.js';
import { isUnavailable } from './db-health.js';
import {
  ClaimBusyError,
  CommitUnknownError,
  DatabaseError,
  EffectivelyOnceError,
  HandlerError,
  HandlerTimeoutError,
  InvalidKeyError,
  describe,
  PayloadMismatchError,
  ShutdownError,
} from './errors.js';
import { payloadHash } from './hash.js';
import type { Lifecycle } from './lifecycle.js';
import type { Settler } from './settle.js';
import { ClaimStatements, LOCK_NOT_AVAILABLE } from './store/claim.js';
import { guardedCall } from './guarded-call.js';
import type { Delivery, DeliveryOutcome } from './types.js';

/** What the database part decided; broker calls happen after the connection is released. */
type Verdict =
  | { kind: 'processed'; durationMs: number }
  | { kind: 'duplicate' }
  | { kind: 'mismatch'; error: PayloadMismatchError }
  | { kind: 'failed'; error: EffectivelyOnceError; infrastructure: boolean }
  | { kind: 'released'; error: EffectivelyOnceError };

/**
 * Runs one delivery: claim → handler → COMMIT → ack. Owns the transaction and never
 * acks a delivery whose effect did not commit (or whose key was not already
 * committed). Never rejects: every failure becomes a retry, a dead letter or an event.
 */
export class Runner<T> {
  private readonly claims: ClaimStatements;

  constructor(
    private readonly cfg: ConsumerConfig<T>,
    private readonly settler: Settler<T>,
    private readonly health: DatabaseHealth,
    private readonly lifecycle: Lifecycle,
  ) {
    this.claims = new ClaimStatements(cfg.table);
  }

  /**
   * Runs the database part and returns the broker part (ack, retry, dead letter) as a
   * function, so the caller can free the concurrency slot (and its connection) at
   * COMMIT instead of holding it through the broker's round trip.
   */
  async process(delivery: Delivery<T>): Promise<() => Promise<DeliveryOutcome>> {
    const admission = this.settler.admit(delivery);
    if ('outcome' in admission) {
      const outcome = await admission.outcome;
      return async () => outcome;
    }
    const key = admission.key;
    const verdict = await this.transact(delivery, key);
    return () => this.settle(delivery, key, verdict);
  }

  private async transact(delivery: Delivery<T>, key: string): Promise<Verdict> {
    const hash = this.cfg.payloadHash ? payloadHash(delivery.payload, delivery.body) : null;
    let client: PoolClient;
    try {
      client = await this.cfg.pool.connect();
    } catch (cause) {
      this.health.markDown(cause);
      return {
        kind: 'failed',
        error: new DatabaseError('connect', cause, { key }),
        infrastructure: true,
      };
    }
    // A checked-out client whose socket dies emits 'error'; unhandled, that kills the process.
    const onClientError = (err: Error) =>
      this.cfg.logger.warn({ err, key }, 'effectively-once: connection lost');
    client.on('error', onClientError);
    let broken: unknown;
    try {
      let claimed: boolean;
      try {
        claimed = await this.claims.begin(client, this.cfg.name, key, hash, this.cfg.lockTimeoutMs);
      } catch (cause) {
        broken = await rollback(client);
        if (pgCode(cause) === LOCK_NOT_AVAILABLE) {
          this.settler.stats.busy++;
          return {
            kind: 'failed',
            error: new ClaimBusyError(key, this.cfg.lockTimeoutMs, cause),
            infrastructure: true,
          };
        }
        broken ??= cause;
        if (isUnavailable(cause)) this.health.markDown(cause);
        return claimFailure(cause, key);
      }
      if (!claimed) {
        if (hash === null) {
          broken = await rollback(client);
          return { kind: 'duplicate' };
        }
        const stored = await this.claims.storedHashAndRollback(client, this.cfg.name, key);
        if (stored !== null && !stored.equals(hash)) {
          return {
            kind: 'mismatch',
            error: new PayloadMismatchError(key, stored.toString('hex'), hash.toString('hex')),
          };
        }
        return { kind: 'duplicate' };
      }
      const started = performance.now();
      const failure = await this.runHandler(client, delivery, key);
      const end = await endTransaction(client, failure, key, this.health);
      broken = end.broken;
      return end.failure ?? { kind: 'processed', durationMs: performance.now() - started };
    } catch (cause) {
      // Only the duplicate's SELECT/ROLLBACK can land here.
      broken = cause;
      if (isUnavailable(cause)) this.health.markDown(cause);
      return {
        kind: 'failed',
        error: new DatabaseError('duplicate check', cause, { key }),
        infrastructure: true,
      };
    } finally {
      client.off('error', onClientError);
      client.release(broken === undefined ? undefined : toError(broken));
    }
  }

  /** Runs the user's handler (and the adapter's in-transaction hook); undefined means success. */
  private async runHandler(
    client: PoolClient,
    delivery: Delivery<T>,
    key: string,
  ): Promise<Verdict | undefined> {
    const handler = this.cfg.handler!;
    const timeoutMs = this.cfg.handlerTimeoutMs;
    const result = await guardedCall(
      async (link) => {
        await handler(delivery.body, {
          tx: client,
          get signal() {
            return link.signal;
          },
          attempt: delivery.attempt,
          key,
          delivery,
        });
      },
      {
        timeoutMs,
        parents: [this.lifecycle.hardStop, delivery.signal],
        timeoutReason: () => new HandlerTimeoutError(key, timeoutMs),
      },
    );
    if (result.kind === 'ok') return runAdapterHook([delivery], client);
    if (result.kind === 'timeout') {
      return {
        kind: 'failed',
        error: new HandlerTimeoutError(key, timeoutMs),
        infrastructure: false,
      };
    }
    if (this.lifecycle.hardStop.aborted) return { kind: 'released', error: new ShutdownError(key) };
    return {
      kind: 'failed',
      ...classifyHandlerError(result.error, key, delivery.attempt, this.health),
    };
  }

  private async settle(
    delivery: Delivery<T>,
    key: string,
    verdict: Verdict,
  ): Promise<DeliveryOutcome> {
    switch (verdict.kind) {
      case 'processed':
        return this.settler.processed(delivery, key, verdict.durationMs);
      case 'duplicate':
        return this.settler.duplicate(delivery, key);
      case 'mismatch':
        return this.settler.mismatch(delivery, key, verdict.error);
      case 'released':
        return this.settler.release(delivery, key);
      case 'failed':
        return this.settler.fail(delivery, key, verdict.error, verdict.infrastructure);
    }
  }
}

/** Rolls back; returns the error if the connection is unusable (so it gets destroyed). */
export async function rollback(client: PoolClient): Promise<unknown> {
  try {
    await client.query('ROLLBACK');
    return undefined;
  } catch (error) {
    return error ?? new Error('ROLLBACK failed');
  }
}

/**
 * A claim that failed for another reason than a busy key. Data exceptions (22) and
 * program limits (54, e.g. an index row too large) come from the key itself and would
 * fail forever: dead-letter them. Anything else is the database's trouble: retry.
 */
export function claimFailure(cause: unknown, key: string): FailedAttempt {
  const code = pgCode(cause) ?? '';
  if (code.startsWith('22') || code.startsWith('54')) {
    return {
      kind: 'failed',
      error: new InvalidKeyError(`Postgres cannot store it (${code}): ${describe(cause)}`, {
        sqlstate: code,
      }),
      infrastructure: false,
    };
  }
  return {
    kind: 'failed',
    error: new DatabaseError('claim', cause, { key }),
    infrastructure: true,
  };
}

/** A failed attempt, as both runners report it. */
export interface FailedAttempt {
  kind: 'failed';
  error: EffectivelyOnceError;
  infrastructure: boolean;
}

/**
 * Ends a claim transaction after the handler ran: on `failure` ROLLBACK (or, after a
 * timeout, destroy the connection, since the handler may still be using it and a
 * ROLLBACK would queue behind it); otherwise COMMIT, whose failure leaves the outcome
 * unknown. `broken` is set when the connection must be destroyed.
 */
export async function endTransaction<F extends { kind: string }>(
  client: PoolClient,
  failure: F | undefined,
  key: string,
  health: DatabaseHealth,
): Promise<{ failure: F | FailedAttempt | undefined; broken: unknown }> {
  if (failure !== undefined) {
    const timedOut = (failure as Partial<FailedAttempt>).error instanceof HandlerTimeoutError;
    return {
      failure,
      broken: timedOut ? (failure as Partial<FailedAttempt>).error : await rollback(client),
    };
  }
  try {
    await client.query('COMMIT');
    return { failure: undefined, broken: undefined };
  } catch (cause) {
    if (isUnavailable(cause)) health.markDown(cause);
    return {
      failure: { kind: 'failed', error: new CommitUnknownError(key, cause), infrastructure: true },
      broken: cause,
    };
  }
}

/**
 * Runs the adapters' in-transaction hooks (e.g. Kafka offsets stored in Postgres). A
 * failure there is the database's, not the message's: it must not spend an attempt.
 */
export async function runAdapterHook(
  deliveries: ReadonlyArray<Delivery<unknown>>,
  client: PoolClient,
): Promise<{ kind: 'failed'; error: EffectivelyOnceError; infrastructure: true } | undefined> {
  try {
    for (const d of deliveries) await d.inTransaction?.(client);
    return undefined;
  } catch (cause) {
    return {
      kind: 'failed',
      error: new DatabaseError('adapter in-transaction hook', cause),
      infrastructure: true,
    };
  }
}

/**
 * Wraps what a handler threw. A connection that died under the handler says nothing
 * about the message, so it does not spend an attempt.
 */
export function classifyHandlerError(
  thrown: unknown,
  key: string,
  attempt: number,
  health: DatabaseHealth,
): { error: EffectivelyOnceError; infrastructure: boolean } {
  const error =
    thrown instanceof EffectivelyOnceError ? thrown : new HandlerError(key, attempt, thrown);
  const infrastructure = isUnavailable(thrown);
  if (infrastructure) health.markDown(thrown);
  return { error, infrastructure };
}

export function pgCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
