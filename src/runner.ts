import type { PoolClient } from 'pg';
import type { ConsumerConfig } from './config.js';
import type { DatabaseHealth } from './db-health.js';
import { isUnavailable } from './db-health.js';
import {
  BrokerError,
  ClaimBusyError,
  CommitUnknownError,
  DatabaseError,
  EffectivelyOnceError,
  HandlerError,
  HandlerTimeoutError,
  PayloadMismatchError,
  ShutdownError,
} from './errors.js';
import type { ConsumerEventHub } from './events.js';
import { payloadHash } from './hash.js';
import { validateKey } from './keys.js';
import { ClaimStatements, LOCK_NOT_AVAILABLE } from './store/claim.js';
import { linkedAbort } from './signals.js';
import type { ConsumerStats, Delivery, DeliveryOutcome } from './types.js';

/** Shutdown state shared by the consumer and its runner. */
export interface Lifecycle {
  /** Set when `stop()` begins: deliveries that have not started are released. */
  stopping: boolean;
  /** Aborts when the stop grace period ran out: in-flight handlers are told to give up. */
  readonly hardStop: AbortSignal;
}

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
    private readonly hub: ConsumerEventHub,
    private readonly stats: ConsumerStats,
    private readonly health: DatabaseHealth,
    private readonly lifecycle: Lifecycle,
  ) {
    this.claims = new ClaimStatements(cfg.table);
  }

  async process(delivery: Delivery<T>): Promise<DeliveryOutcome> {
    this.stats.received++;
    if (this.lifecycle.stopping) return this.release(delivery, undefined);
    if (delivery.rejection !== undefined) return this.deadLetter(delivery, delivery.key, delivery.rejection);
    let key: string;
    try {
      key = validateKey(this.cfg.key ? this.cfg.key(delivery) : delivery.key, this.cfg.maxKeyLength);
    } catch (error) {
      return this.deadLetter(delivery, undefined, asEoError(error));
    }
    const verdict = await this.transact(delivery, key);
    return this.settle(delivery, key, verdict);
  }

  private async transact(delivery: Delivery<T>, key: string): Promise<Verdict> {
    const hash = this.cfg.payloadHash ? payloadHash(delivery.payload, delivery.body) : null;
    let client: PoolClient;
    try {
      client = await this.cfg.pool.connect();
    } catch (cause) {
      this.health.markDown(cause);
      return { kind: 'failed', error: new DatabaseError('connect', cause, { key }), infrastructure: true };
    }
    // A checked-out client whose socket dies emits 'error'; unhandled, that kills the process.
    const onClientError = (err: Error) => this.cfg.logger.warn({ err, key }, 'effectively-once: connection lost');
    client.on('error', onClientError);
    let broken: unknown;
    try {
      let claimed: boolean;
      try {
        claimed = await this.claims.begin(client, this.cfg.name, key, hash, this.cfg.lockTimeoutMs);
      } catch (cause) {
        broken = await rollback(client);
        if (pgCode(cause) === LOCK_NOT_AVAILABLE) {
          this.stats.busy++;
          return { kind: 'failed', error: new ClaimBusyError(key, this.cfg.lockTimeoutMs, cause), infrastructure: true };
        }
        broken ??= cause;
        if (isUnavailable(cause)) this.health.markDown(cause);
        return { kind: 'failed', error: new DatabaseError('claim', cause, { key }), infrastructure: true };
      }
      if (!claimed) {
        if (hash === null) {
          broken = await rollback(client);
          return { kind: 'duplicate' };
        }
        const stored = await this.claims.storedHashAndRollback(client, this.cfg.name, key);
        if (stored !== null && !stored.equals(hash)) {
          return { kind: 'mismatch', error: new PayloadMismatchError(key, stored.toString('hex'), hash.toString('hex')) };
        }
        return { kind: 'duplicate' };
      }
      const started = performance.now();
      const outcome = await this.runHandler(client, delivery, key);
      if (outcome !== undefined) {
        // A timed-out handler may still be using the client: destroy it rather than queue ROLLBACK behind it.
        broken = outcome.kind === 'failed' && outcome.error instanceof HandlerTimeoutError ? outcome.error : await rollback(client);
        return outcome;
      }
      try {
        await client.query('COMMIT');
      } catch (cause) {
        broken = cause;
        if (isUnavailable(cause)) this.health.markDown(cause);
        return { kind: 'failed', error: new CommitUnknownError(key, cause), infrastructure: true };
      }
      return { kind: 'processed', durationMs: performance.now() - started };
    } catch (cause) {
      // Only the duplicate's SELECT/ROLLBACK can land here.
      broken = cause;
      if (isUnavailable(cause)) this.health.markDown(cause);
      return { kind: 'failed', error: new DatabaseError('duplicate check', cause, { key }), infrastructure: true };
    } finally {
      client.off('error', onClientError);
      client.release(broken === undefined ? undefined : toError(broken));
    }
  }

  /** Runs the user's handler (and the adapter's in-transaction hook); undefined means success. */
  private async runHandler(client: PoolClient, delivery: Delivery<T>, key: string): Promise<Verdict | undefined> {
    const { controller, dispose } = linkedAbort([this.lifecycle.hardStop, delivery.signal]);
    let timer: NodeJS.Timeout | undefined;
    try {
      const work = (async () => {
        await this.cfg.handler(delivery.body, {
          tx: client,
          signal: controller.signal,
          attempt: delivery.attempt,
          key,
          delivery,
        });
        await delivery.inTransaction?.(client);
      })();
      const timeoutMs = this.cfg.handlerTimeoutMs;
      const timeout =
        timeoutMs > 0
          ? new Promise<'timeout'>((resolve) => {
              timer = setTimeout(() => resolve('timeout'), timeoutMs);
            })
          : undefined;
      const settled = work.then(
        () => 'ok' as const,
        (error: unknown) => ({ error }),
      );
      const result = await (timeout ? Promise.race([settled, timeout]) : settled);
      if (result === 'ok') return undefined;
      if (result === 'timeout') {
        controller.abort(new HandlerTimeoutError(key, timeoutMs));
        return { kind: 'failed', error: new HandlerTimeoutError(key, timeoutMs), infrastructure: false };
      }
      if (this.lifecycle.hardStop.aborted) return { kind: 'released', error: new ShutdownError(key) };
      const error = result.error instanceof EffectivelyOnceError ? result.error : new HandlerError(key, delivery.attempt, result.error);
      // A connection that died under the handler says nothing about the message.
      const unavailable = isUnavailable(result.error);
      if (unavailable) this.health.markDown(result.error);
      return { kind: 'failed', error, infrastructure: unavailable };
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      dispose();
    }
  }

  private async settle(delivery: Delivery<T>, key: string, verdict: Verdict): Promise<DeliveryOutcome> {
    switch (verdict.kind) {
      case 'processed':
        this.stats.processed++;
        this.hub.emit('processed', { key, attempt: delivery.attempt, durationMs: verdict.durationMs });
        await this.ack(delivery, key);
        return 'processed';
      case 'duplicate':
        this.stats.duplicates++;
        this.hub.emit('duplicate', { key, attempt: delivery.attempt });
        await this.ack(delivery, key);
        return 'duplicate';
      case 'mismatch': {
        this.stats.mismatches++;
        const { storedHash, payloadHash: hash } = verdict.error.details as { storedHash: string; payloadHash: string };
        this.hub.emit('mismatch', { key, storedHash, payloadHash: hash });
        if (this.cfg.onMismatch === 'ack') {
          await this.ack(delivery, key);
          return 'duplicate';
        }
        return this.deadLetter(delivery, key, verdict.error);
      }
      case 'released':
        return this.release(delivery, key);
      case 'failed':
        return this.fail(delivery, key, verdict.error, verdict.infrastructure);
    }
  }

  /**
   * Infrastructure failures (database down, busy claim, unknown commit) are always
   * retried: they say nothing about the message. Handler failures spend attempts and
   * end in the dead-letter target after `maxAttempts`.
   */
  private async fail(delivery: Delivery<T>, key: string, error: EffectivelyOnceError, infrastructure: boolean): Promise<DeliveryOutcome> {
    this.stats.failed++;
    const exhausted = !infrastructure && (!error.retryable || delivery.attempt >= this.cfg.maxAttempts);
    this.hub.emit('failed', { key, attempt: delivery.attempt, error, willRetry: !exhausted });
    if (exhausted) return this.deadLetter(delivery, key, error);
    const delayMs = error instanceof ClaimBusyError ? this.cfg.busyRetryDelayMs : this.cfg.backoff(delivery.attempt);
    try {
      await delivery.retry(delayMs, error);
      this.stats.retried++;
      return 'retry';
    } catch (cause) {
      this.reportBroker('retry', cause, key);
      return 'unsettled';
    }
  }

  private async deadLetter(delivery: Delivery<T>, key: string | undefined, error: EffectivelyOnceError): Promise<DeliveryOutcome> {
    try {
      await delivery.deadLetter(error);
    } catch (cause) {
      this.reportBroker('dead-letter', cause, key);
      return 'unsettled';
    }
    this.stats.deadLettered++;
    this.hub.emit('dead-lettered', { key, attempt: delivery.attempt, error });
    return 'dead-lettered';
  }

  private async release(delivery: Delivery<T>, key: string | undefined): Promise<DeliveryOutcome> {
    try {
      await delivery.release();
      this.stats.released++;
      return 'released';
    } catch (cause) {
      this.reportBroker('release', cause, key);
      return 'unsettled';
    }
  }

  /** A failed ack after COMMIT loses nothing: the redelivery will be a duplicate. */
  private async ack(delivery: Delivery<T>, key: string): Promise<void> {
    try {
      await delivery.ack();
    } catch (cause) {
      this.stats.ackFailures++;
      this.reportBroker('ack', cause, key);
    }
  }

  private reportBroker(operation: string, cause: unknown, key: string | undefined): void {
    const error = cause instanceof EffectivelyOnceError ? cause : new BrokerError(operation, cause, { details: { key } });
    this.hub.emit('error', error);
  }
}

/** Rolls back; returns the error if the connection is unusable (so it gets destroyed). */
async function rollback(client: PoolClient): Promise<unknown> {
  try {
    await client.query('ROLLBACK');
    return undefined;
  } catch (error) {
    return error ?? new Error('ROLLBACK failed');
  }
}

function pgCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

function asEoError(error: unknown): EffectivelyOnceError {
  return error instanceof EffectivelyOnceError ? error : new HandlerError('?', 0, error);
}
