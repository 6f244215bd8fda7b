import { admit } from './admission.js';
import { conflictDelay } from '../backoff.js';
import type { ConsumerConfig } from './config.js';
import {
  type EffectivelyOnceError,
  HandlerTimeoutError,
  PayloadMismatchError,
  ShutdownError,
} from '../errors.js';
import { guardedCall } from '../guarded-call.js';
import type { Lifecycle } from './lifecycle.js';
import type { Settler } from './settle.js';
import { failureOf, runAdapterHook, workFailure } from './steps.js';
import { sleep } from '../sleep.js';
import { ClaimStatements } from '../store/claim.js';
import {
  ClaimConnection,
  conflictsExhausted,
  type ConnectionDeps,
  type FailedAttempt,
  type Released,
  type WorkResult,
} from '../tx/claim-connection.js';
import type { Delivery, DeliveryOutcome } from '../types.js';

/** What the database part decided; broker calls happen after the connection is released. */
type Verdict =
  | { kind: 'processed'; durationMs: number; warning: EffectivelyOnceError | undefined }
  | { kind: 'duplicate' }
  | { kind: 'mismatch'; error: PayloadMismatchError }
  | FailedAttempt
  | Released;

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
    private readonly connections: ConnectionDeps,
    private readonly lifecycle: Lifecycle,
  ) {
    this.claims = new ClaimStatements(cfg.table, cfg.isolationLevel, cfg.retention?.olderThanMs);
  }

  /**
   * Runs the database part and returns the broker part (ack, retry, dead letter) as a
   * function, so the caller can free the concurrency slot (and its connection) at
   * COMMIT instead of holding it through the broker's round trip.
   */
  async process(delivery: Delivery<T>): Promise<() => Promise<DeliveryOutcome>> {
    const admission = admit(this.cfg, this.settler, this.lifecycle, delivery);
    if ('outcome' in admission) {
      const outcome = await admission.outcome;
      return async () => outcome;
    }
    const { key, hash } = admission;
    const verdict = await this.transact(delivery, key, hash);
    return () => this.settle(delivery, key, verdict);
  }

  /** Runs the transaction again, in place, while it loses serialization races (bounded). */
  private async transact(
    delivery: Delivery<T>,
    key: string,
    hash: Buffer | null,
  ): Promise<Verdict> {
    for (let conflicts = 0; ; conflicts++) {
      const verdict = await this.attempt(delivery, key, hash);
      if (verdict.kind !== 'failed' || !verdict.conflict) return verdict;
      if (delivery.signal?.aborted === true) return verdict;
      if (conflicts >= this.cfg.serializationRetries) return conflictsExhausted(verdict);
      this.settler.stats.serializationRetries++;
      await sleep(conflictDelay(conflicts + 1), this.lifecycle.hardStop);
      if (this.lifecycle.hardStop.aborted)
        return { kind: 'released', error: new ShutdownError(key) };
    }
  }

  /** One transaction: claim, handler, verified COMMIT. */
  private attempt(delivery: Delivery<T>, key: string, hash: Buffer | null): Promise<Verdict> {
    return this.settler.tracing.step(
      delivery,
      'transaction',
      () => this.transaction(delivery, key, hash),
      failureOf,
    );
  }

  private async transaction(
    delivery: Delivery<T>,
    key: string,
    hash: Buffer | null,
  ): Promise<Verdict> {
    const tracing = this.settler.tracing;
    const conn = await ClaimConnection.open(this.connections, key);
    if (!(conn instanceof ClaimConnection)) return conn;
    try {
      let claim: { xid: string | null } | undefined;
      try {
        // A claim can wait without end (a key another instance holds, a database that
        // answers nothing): at the hard stop it is given up on, cancelled and released.
        claim = await tracing.step(delivery, 'claim', () =>
          conn.untilHardStop(
            this.claims.begin(conn.client, this.cfg.name, key, hash, this.cfg.lockTimeoutMs),
          ),
        );
      } catch (cause) {
        return await conn.claimFailed(cause, this.cfg.lockTimeoutMs);
      }
      if (claim === undefined) return { kind: 'released', error: new ShutdownError(key) };
      const { xid } = claim;
      if (xid === null) return await this.seenBefore(conn, key, hash);
      const started = performance.now();
      const work = await tracing.step(
        delivery,
        'handler',
        () => this.runHandler(conn, delivery, key),
        workFailure,
      );
      const end =
        work.kind === 'ok'
          ? await tracing.step(delivery, 'commit', () => conn.finish(work, xid), failureOf)
          : await conn.finish(work, xid);
      if (end.kind !== 'committed') return end;
      return { kind: 'processed', durationMs: performance.now() - started, warning: end.warning };
    } finally {
      conn.close();
    }
  }

  /** The key was committed before: a duplicate, or a mismatch when the payload differs. */
  private async seenBefore(
    conn: ClaimConnection,
    key: string,
    hash: Buffer | null,
  ): Promise<Verdict> {
    if (hash === null) {
      await conn.rollback();
      return { kind: 'duplicate' };
    }
    let stored: Buffer | null | undefined;
    try {
      stored = await conn.untilHardStop(
        this.claims.storedHashAndRollback(conn.client, this.cfg.name, key),
      );
    } catch (cause) {
      return conn.claimFailed(cause, this.cfg.lockTimeoutMs);
    }
    // Given up on at the hard stop: the connection is destroyed, which ends the transaction.
    if (stored === undefined) return { kind: 'released', error: new ShutdownError(key) };
    if (stored !== null && !stored.equals(hash)) {
      return {
        kind: 'mismatch',
        error: new PayloadMismatchError(key, stored.toString('hex'), hash.toString('hex')),
      };
    }
    return { kind: 'duplicate' };
  }

  /** Runs the user's handler, then the adapter's in-transaction hook. */
  private async runHandler(
    conn: ClaimConnection,
    delivery: Delivery<T>,
    key: string,
  ): Promise<WorkResult> {
    const handler = this.cfg.handler!;
    const timeoutMs = this.cfg.handlerTimeoutMs;
    const tx = conn.guard.tx;
    const result = await guardedCall(
      async (link) => {
        try {
          await handler(delivery.body, {
            tx,
            get signal() {
              return link.signal;
            },
            attempt: delivery.attempt,
            key,
            delivery,
          });
        } finally {
          // What it left running on tx is still its work: under its timeout and the hard stop.
          await conn.guard.finish();
        }
      },
      {
        timeoutMs,
        abandonOn: this.lifecycle.hardStop,
        parents: [delivery.signal],
        timeoutReason: () => new HandlerTimeoutError(key, timeoutMs),
      },
    );
    if (result.kind === 'timeout')
      return { kind: 'timeout', error: new HandlerTimeoutError(key, timeoutMs) };
    if (result.kind === 'error') {
      if (this.lifecycle.hardStop.aborted) return { kind: 'stopped' };
      return { kind: 'threw', error: result.error, attempt: delivery.attempt };
    }
    return runAdapterHook([delivery], conn);
  }

  private async settle(
    delivery: Delivery<T>,
    key: string,
    verdict: Verdict,
  ): Promise<DeliveryOutcome> {
    switch (verdict.kind) {
      case 'processed':
        if (verdict.warning !== undefined) this.settler.report(verdict.warning);
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
