import { admit } from './admission.js';
import type { ConsumerConfig } from './config.js';
import {
  type EffectivelyOnceError,
  HandlerTimeoutError,
  PayloadMismatchError,
  ShutdownError,
} from '../errors.js';
import { workTimeoutMs } from './work-deadline.js';
import type { Lifecycle } from './lifecycle.js';
import type { Settler } from './settle.js';
import { runAdapterHook } from './steps.js';
import { ClaimStatements } from '../store/claim.js';
import type {
  ClaimTransaction,
  ClaimTransactions,
  FailedAttempt,
  Released,
  WorkResult,
} from '../tx/claim-transaction.js';
import { retryConflicts } from '../tx/conflicts.js';
import { type ClaimPlan, driveTransaction, runWork, type Steps } from '../tx/drive.js';
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
export class Runner<T, Tx> {
  private readonly claims: ClaimStatements;

  constructor(
    private readonly cfg: ConsumerConfig<T, Tx>,
    private readonly settler: Settler<T>,
    private readonly transactions: ClaimTransactions<Tx>,
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
    const verdict = await this.transact(delivery, key, hash).catch((thrown: unknown) =>
      this.settler.escaped(key, thrown),
    );
    return () => this.settle(delivery, key, verdict);
  }

  /**
   * The claim transaction, run again in place while it loses serialization races
   * (bounded; past that an attempt is spent), until the delivery's own signal says the
   * broker took it back.
   */
  private transact(delivery: Delivery<T>, key: string, hash: Buffer | null): Promise<Verdict> {
    const { settler, lifecycle } = this;
    const steps: Steps = {
      step: (name, fn, failure) => settler.tracing.step(delivery, name, fn, failure),
    };
    return retryConflicts<Verdict>(
      () => driveTransaction(this.transactions, this.plan(delivery, key, hash), steps),
      {
        retries: this.cfg.serializationRetries,
        exhausted: 'spend-attempt',
        stopOn: delivery.signal,
        onRetry: () => settler.stats.serializationRetries++,
      },
      lifecycle.hardStop,
      key,
    );
  }

  /** One transaction's steps for one delivery: its claim, a key seen before, the handler. */
  private plan(
    delivery: Delivery<T>,
    key: string,
    hash: Buffer | null,
  ): ClaimPlan<{ xid: string | null }, Verdict, Tx> {
    const { cfg } = this;
    return {
      key,
      target: { key, scope: cfg.name, delivery: delivery },
      claimWaitMs: cfg.lockTimeoutMs,
      claim: (session) => this.claims.begin(session, cfg.name, key, hash, cfg.lockTimeoutMs),
      claimed: async ({ xid }, conn) =>
        xid === null
          ? { kind: 'done', verdict: await this.seenBefore(conn, key, hash) }
          : { kind: 'run', xid },
      work: (conn) => this.runHandler(conn, delivery, key),
      ended: async (end, _work, durationMs) =>
        end.kind === 'committed' ? { kind: 'processed', durationMs, warning: end.warning } : end,
    };
  }

  /** The key was committed before: a duplicate, or a mismatch when the payload differs. */
  private async seenBefore(
    conn: ClaimTransaction<Tx>,
    key: string,
    hash: Buffer | null,
  ): Promise<Verdict> {
    if (hash === null) {
      await conn.rollback();
      return { kind: 'duplicate' };
    }
    let stored: Buffer | null | undefined;
    try {
      stored = await conn.untilHardStop(this.claims.storedHash(conn.client, this.cfg.name, key));
    } catch (cause) {
      return conn.claimFailed(cause, this.cfg.lockTimeoutMs);
    }
    // Given up on at the hard stop: the connection is destroyed, which ends the transaction.
    if (stored === undefined) return { kind: 'released', error: new ShutdownError(key) };
    await conn.rollback();
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
    conn: ClaimTransaction<Tx>,
    delivery: Delivery<T>,
    key: string,
  ): Promise<WorkResult> {
    const handler = this.cfg.handler!;
    const timeoutMs = workTimeoutMs(this.cfg.handlerTimeoutMs, [delivery]);
    // The claim waited past the source's deadline: nothing runs, the claim rolls back.
    if (timeoutMs === 'passed') return { kind: 'timeout', error: new HandlerTimeoutError(key, 0) };
    const work = await runWork(
      conn,
      {
        timeoutMs,
        hardStop: this.lifecycle.hardStop,
        signalParents: [delivery.signal],
        attempt: delivery.attempt,
      },
      (tx, link) =>
        handler(delivery.body, {
          tx,
          get signal() {
            return link.signal;
          },
          attempt: delivery.attempt,
          key,
          delivery,
        }),
    );
    if (work.kind !== 'ok') return work;
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
