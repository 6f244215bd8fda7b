import type { Pool, PoolClient } from 'pg';
import {
  ClaimBusyError,
  CommitFailedError,
  CommitUnknownError,
  DatabaseError,
  EffectivelyOnceError,
  HandlerError,
  InvalidKeyError,
  ShutdownError,
  TransactionAbortedError,
  TransactionControlError,
  describe,
} from '../errors.js';
import { commitClaim, type CommitOutcome } from '../store/commit.js';
import {
  IN_FAILED_TRANSACTION,
  isSerializationFailure,
  isStatementError,
  isTransactionTimeout,
  isUnavailable,
  LOCK_NOT_AVAILABLE,
  READ_ONLY_SQL_TRANSACTION,
  sqlstateOf,
} from '../store/pg-errors.js';
import type { Logger } from '../types.js';
import { acquireClient } from './acquire.js';
import { cancelBackend } from './cancel.js';
import type {
  ClaimSession,
  ClaimTransaction,
  ClaimTransactions,
  FailedAttempt,
  OutsideCommit,
  Released,
  TransactionEnd,
  WorkResult,
} from './claim-transaction.js';
import { handlersFault, infra } from './claim-transaction.js';
import { TransactionGuard } from './guard.js';
import { committedOnPool, settledStatus } from './xact-status.js';

/** What a claim connection needs from its owner (a consumer, an HTTP endpoint, a relay). */
export interface ConnectionDeps {
  readonly pool: Pool;
  /** Told when Postgres looks unreachable (the consumer pauses deliveries until it is back). */
  readonly health: { markDown(cause: unknown): void };
  readonly logger: Logger;
  readonly acquireTimeoutMs: number;
  /** Aborts when stop()'s grace period ran out. */
  readonly hardStop: AbortSignal;
}

/** Bound on the socket that carries a cancel request (nothing waits for it). */
const CANCEL_TIMEOUT_MS = 5000;

/** The claim session of a client of the library's own: one round trip, the claim BEGINs. */
export function pgClaimSession(client: PoolClient): ClaimSession {
  return { sql: client, pg: client, begins: true };
}

/**
 * The library's pg client in a claim session, for a door whose claim is one pg round
 * trip and which takes no data layer yet. A data layer's session has none: the door's
 * option checks keep it from getting there, so this only throws on a wiring mistake.
 */
export function pgClientOf(session: ClaimSession): PoolClient {
  if (session.pg === undefined || !session.begins)
    throw new TypeError("effectively-once: this claim needs the library's own pg client");
  return session.pg;
}

/**
 * The claim transactions of `deps.pool`: each on a pg client the library checks out,
 * the transaction begun by the claim statement itself.
 */
export function pgClaimTransactions(deps: ConnectionDeps): ClaimTransactions<PoolClient> {
  return {
    hardStop: deps.hardStop,
    claimBegins: true,
    open: (key) => ClaimConnection.open(deps, key),
  };
}

/**
 * One claim transaction on a pg client of the library's pool, from checkout to release
 * (the {@link ClaimTransaction} the library opens itself). It owns the client-error
 * listener, the handler's guarded `tx`, the rollback that tells a live connection from a
 * dead one, the verified COMMIT, and the classification of every failure into "the
 * message's fault" (spends an attempt), "ours" (infrastructure: retried, no attempt) or
 * "a conflict" (run again at once).
 */
export class ClaimConnection implements ClaimTransaction<PoolClient> {
  private readonly guard: TransactionGuard;
  private lost: unknown;
  private broken: unknown;
  private abandoned = false;
  /** The abandoned statement's cancel, until it was sent (or failed): see {@link close}. */
  private cancelling: Promise<void> | undefined;
  private closed = false;
  private readonly onError = (err: Error): void => {
    this.lost ??= err;
    this.deps.logger.warn({ err, key: this.key }, 'effectively-once: connection lost');
  };

  /** {@inheritDoc ClaimTransaction.pg}: the same client as {@link client}. */
  readonly pg: PoolClient;

  /** {@inheritDoc ClaimTransaction.pool} */
  get pool(): Pool {
    return this.deps.pool;
  }

  private constructor(
    readonly client: PoolClient,
    private readonly deps: ConnectionDeps,
    readonly key: string,
  ) {
    this.pg = client;
    // A checked-out client whose socket dies emits 'error'; unhandled, that kills the process.
    client.on('error', this.onError);
    this.guard = new TransactionGuard(client);
  }

  /** Checks a connection out, or says why the delivery cannot run now. */
  static async open(
    deps: ConnectionDeps,
    key: string,
  ): Promise<ClaimConnection | FailedAttempt | Released> {
    try {
      return new ClaimConnection(
        await acquireClient(deps.pool, deps.acquireTimeoutMs, deps.hardStop),
        deps,
        key,
      );
    } catch (cause) {
      if (deps.hardStop.aborted) return { kind: 'released', error: new ShutdownError(key) };
      // A pool with no free connection says nothing about the database's health.
      const timedOut = cause instanceof DatabaseError && cause.details.timedOut === true;
      if (!timedOut) deps.health.markDown(cause instanceof DatabaseError ? cause.cause : cause);
      return {
        kind: 'failed',
        error:
          cause instanceof DatabaseError ? cause : new DatabaseError('connect', cause, { key }),
        infrastructure: true,
        conflict: false,
      };
    }
  }

  /** {@inheritDoc ClaimTransaction.tx} */
  get tx(): PoolClient {
    return this.guard.tx;
  }

  /** {@inheritDoc ClaimTransaction.lateUse} */
  get lateUse(): TransactionControlError | undefined {
    return this.guard.lateUse;
  }

  /** {@inheritDoc ClaimTransaction.sealTx} */
  sealTx(): void {
    this.guard.end();
  }

  /** {@inheritDoc ClaimTransaction.settleTx} */
  settleTx(): Promise<void> {
    return this.guard.finish();
  }

  /**
   * Whether the claim's transaction `xid` was committed by the handler, before the
   * library's COMMIT. A connection still inside a transaction (pg's status 'T', or 'E'
   * after a failed statement) is asked nothing; otherwise Postgres says: on the session
   * itself, or on the pool while the handler may still be running a statement on it.
   */
  async committedOutside(xid: string, handlerMayRun: boolean): Promise<OutsideCommit> {
    const client = this.client as { getTransactionStatus?: () => string | null };
    const status = client.getTransactionStatus?.();
    if (status === 'T' || status === 'E') return 'not-committed';
    if (handlerMayRun)
      return committedOnPool(this.deps.pool, xid, this.deps.acquireTimeoutMs, this.deps.hardStop);
    try {
      const { rows } = await this.client.query<{ status: string | null }>(
        'SELECT pg_xact_status($1::xid8) AS status',
        [xid],
      );
      return rows[0]?.status === 'committed' ? 'committed' : 'not-committed';
    } catch {
      // A lost connection, or an open failed transaction (an older pg, no status): the
      // usual failure path handles both.
      return 'not-committed';
    }
  }

  /** A claim statement failed: roll back and say what it means for the delivery. */
  async claimFailed(cause: unknown, lockTimeoutMs: number): Promise<FailedAttempt> {
    await this.rollback();
    const code = sqlstateOf(cause) ?? '';
    if (code === LOCK_NOT_AVAILABLE)
      return infra(new ClaimBusyError(this.key, lockTimeoutMs, cause));
    if (isSerializationFailure(cause))
      return { ...infra(new DatabaseError('claim', cause, { key: this.key })), conflict: true };
    // Data exceptions (22) and program limits (54, e.g. an index row too large) come from
    // the key itself and would fail forever: dead-letter them.
    if (code.startsWith('22') || code.startsWith('54')) {
      return {
        kind: 'failed',
        error: new InvalidKeyError(`Postgres cannot store it (${code}): ${describe(cause)}`, {
          sqlstate: code,
        }),
        infrastructure: false,
        conflict: false,
      };
    }
    if (!isStatementError(cause)) {
      this.markBroken(cause);
      this.markDownIfUnavailable(cause);
    }
    return infra(
      cause instanceof EffectivelyOnceError
        ? cause
        : new DatabaseError('claim', cause, { key: this.key }),
    );
  }

  /**
   * Ends the transaction after the user's code ran: COMMIT when it succeeded (verified
   * against the claim's transaction id `xid`), ROLLBACK otherwise, or, after a timeout,
   * cancel its query server-side and destroy the connection.
   */
  async finish(work: WorkResult, xid: string): Promise<TransactionEnd> {
    switch (work.kind) {
      case 'ok': {
        // Pipelined with the xid check and COMMIT in one simple-protocol round trip,
        // which carries no values: the doors give this client text.
        if (typeof work.beforeCommit === 'object')
          throw new TypeError(
            "effectively-once: the library's own client takes its last statement as text",
          );
        // Queries the handler left floating run first; one it sent after settling was
        // refused, and the transaction must not commit without what it meant to write.
        await this.guard.settled();
        const late = this.guard.lateUse;
        if (late === undefined) return this.commit(xid, work.beforeCommit);
        await this.rollback();
        return { kind: 'failed', error: late, infrastructure: false, conflict: false };
      }
      case 'timeout':
        this.abandon(work.error);
        return { kind: 'failed', error: work.error, infrastructure: false, conflict: false };
      case 'stopped': {
        const error = new ShutdownError(this.key);
        // Given up on at the hard stop while still running (a handler that ignores its
        // signal): a ROLLBACK would queue behind its statement, so abandon it as on timeout.
        if (this.guard.busy) this.abandon(error);
        else await this.rollback();
        return { kind: 'released', error };
      }
      case 'hook-failed': {
        await this.rollback();
        // 25P02: a handler statement failed and the handler caught it, so the hook found
        // the transaction aborted. The handler's failure, as COMMIT would have found it.
        if (sqlstateOf(work.error) === IN_FAILED_TRANSACTION) return this.aborted();
        const timedOut = this.timedOut(work.error);
        if (timedOut !== undefined) return timedOut;
        // 25006 after the claim's own INSERT succeeded in this very transaction: the
        // session takes writes (a standby or a demoted primary would have refused the
        // claim, and a failover ends the session), so the handler made the transaction
        // read-only (SET TRANSACTION READ ONLY). Its doing, every time: an attempt spent.
        if (sqlstateOf(work.error) === READ_ONLY_SQL_TRANSACTION)
          return handlersFault(new TransactionAbortedError(this.key, 'read-only', work.error));
        return {
          ...infra(new DatabaseError('adapter in-transaction hook', work.error, { key: this.key })),
          conflict: isSerializationFailure(work.error),
          ownRow: true,
        };
      }
      case 'threw':
        await this.rollback();
        return this.handlerFailed(work.error, work.attempt);
    }
  }

  /**
   * Rolls back; a connection that cannot is destroyed on release. A ROLLBACK still
   * unanswered at the hard stop (a database that answers nothing) is abandoned like a
   * COMMIT: the connection destroyed ends the transaction all the same.
   */
  async rollback(): Promise<void> {
    if (!this.alive) return;
    try {
      await this.untilHardStop(this.client.query('ROLLBACK'));
    } catch (error) {
      // Even a statement error: the session may still be in the transaction (aborted),
      // and the next request to check it out would run inside it or meet 25P02.
      this.markBroken(error);
    }
  }

  /** Returns the connection to the pool, or destroys it when it may not be reused. */
  close(failure?: unknown): void {
    // pg-pool gives each checkout its own release: a second call would release the
    // client again under whoever checked it out next, mid-transaction.
    if (this.closed) return;
    this.closed = true;
    if (failure !== undefined) this.markBroken(failure);
    this.guard.end();
    this.client.off('error', this.onError);
    const reason = this.broken ?? this.lost;
    const release = (): void =>
      this.client.release(reason === undefined ? undefined : toError(reason));
    // Through a pooler (PgBouncer) the cancel names the client connection, not the server
    // session: sent after that connection closed, it names a key the pooler has already
    // forgotten and the statement runs on, holding the claim's locks. So the connection
    // is destroyed once the cancel was sent (at most CANCEL_TIMEOUT_MS later).
    if (this.cancelling !== undefined) void this.cancelling.then(release, release);
    else release();
  }

  /** Whether the connection can still be used (no socket error, nothing that broke it). */
  private get alive(): boolean {
    return this.lost === undefined && this.broken === undefined;
  }

  /**
   * A handler error is the message's fault unless the claim's own connection died
   * under it: then it says nothing about the message (infrastructure). A downstream
   * service's ECONNREFUSED is the handler's failure like any other.
   */
  private handlerFailed(thrown: unknown, attempt: number): FailedAttempt {
    const timedOut = this.timedOut(thrown);
    if (timedOut !== undefined) return timedOut;
    const error =
      thrown instanceof EffectivelyOnceError ? thrown : new HandlerError(this.key, attempt, thrown);
    if (!this.alive) {
      this.markDownIfUnavailable(thrown);
      return infra(error);
    }
    const conflict =
      isSerializationFailure(thrown) || isSerializationFailure(this.guard.firstError);
    return { kind: 'failed', error, infrastructure: false, conflict };
  }

  private async commit(xid: string, beforeCommit: string | undefined): Promise<TransactionEnd> {
    if (!this.alive) {
      // COMMIT was never sent, so nothing committed: the server aborts a dead session's transaction.
      const timedOut = this.timedOut(undefined);
      if (timedOut !== undefined) return timedOut;
      this.markDownIfUnavailable(this.lost);
      return infra(
        new DatabaseError('connection (before COMMIT)', this.lost ?? this.broken, {
          key: this.key,
        }),
      );
    }
    const outcome = await this.commitBeforeHardStop(xid, beforeCommit);
    if (outcome === 'not-sent') return { kind: 'released', error: new ShutdownError(this.key) };
    // Given up on with the COMMIT on the wire: the server may have kept it, so the
    // outcome is unknown, not "nothing applied". The delivery still goes back (its
    // redelivery's claim settles it); an HTTP request is answered outcome-unknown.
    if (outcome === 'abandoned')
      return {
        kind: 'released',
        error: new CommitUnknownError(this.key, new ShutdownError(this.key)),
      };
    const first = this.guard.firstError;
    switch (outcome.kind) {
      case 'committed':
        return { kind: 'committed', warning: undefined };
      case 'aborted':
        return this.aborted();
      case 'rejected':
        return {
          kind: 'failed',
          error: new CommitFailedError(this.key, outcome.error),
          infrastructure: false,
          conflict: isSerializationFailure(outcome.error),
        };
      case 'ended':
        if (outcome.committed) {
          return {
            kind: 'committed',
            warning: new TransactionControlError(
              "the handler committed the claim's transaction itself; what it ran after that ran outside it",
              { key: this.key },
            ),
          };
        }
        return {
          kind: 'failed',
          error: new TransactionAbortedError(this.key, 'ended', first),
          infrastructure: false,
          conflict: false,
        };
      case 'unknown':
        this.markBroken(outcome.error);
        // An ERROR 25006 on the COMMIT's round trip (the library's last write, e.g. a
        // stored response) came before the COMMIT, which the server then skipped: a
        // known rollback on a live session that takes writes (the claim's INSERT went
        // through in it), so the handler made the transaction read-only. The broken
        // connection is destroyed, which ends the aborted transaction.
        if (
          sqlstateOf(outcome.error) === READ_ONLY_SQL_TRANSACTION &&
          (outcome.error as { severity?: unknown }).severity === 'ERROR'
        )
          return handlersFault(new TransactionAbortedError(this.key, 'read-only', outcome.error));
        return (await this.settleTimedOut(outcome.error, xid)) ?? this.commitUnknown(outcome.error);
    }
  }

  private commitUnknown(cause: unknown): FailedAttempt {
    this.markDownIfUnavailable(cause);
    return infra(new CommitUnknownError(this.key, cause));
  }

  /**
   * COMMIT's answer was the FATAL of the server ending this session for this
   * transaction's own idleness or length (25P03, 25P04; the FATAL came back as COMMIT's
   * answer because pg had not read it yet, or the timeout fired inside COMMIT, during a
   * deferred trigger). The code alone does not say whether the commit record was
   * written, so the claim's transaction `xid` settles it, on another connection: rolled
   * back, the message's failure like the same timeout during the handler (an attempt
   * spent; a batch is bisected); committed, committed. Anything else (still in progress
   * past the wait, no connection, the check failing) stays unknown: undefined.
   *
   * Only for these timeouts: the server that sent the FATAL is up and aborts the
   * transaction itself. After a plain dropped connection the pool may be talking to
   * another server by now (a failover's new primary, where a transaction that never
   * reached it may have its xid reused), so its answer about `xid` is not evidence.
   */
  private async settleTimedOut(answer: unknown, xid: string): Promise<TransactionEnd | undefined> {
    const cause = [answer, this.lost].find(isTransactionTimeout);
    if (cause === undefined) return undefined;
    const { pool, acquireTimeoutMs, hardStop } = this.deps;
    const status = await settledStatus(pool, xid, acquireTimeoutMs, hardStop);
    if (status.kind === 'committed') return { kind: 'committed', warning: undefined };
    if (status.kind === 'aborted')
      return handlersFault(new TransactionAbortedError(this.key, 'timed-out', cause));
    this.deps.logger.warn(
      { err: status.why, key: this.key },
      "effectively-once: could not settle a timed-out COMMIT by its transaction's id",
    );
    return undefined;
  }

  /**
   * The verified COMMIT, unless a shutdown's hard stop comes first. A COMMIT can wait
   * without end (a deferred constraint's check waiting on a lock, a synchronous standby
   * that is gone): at the hard stop it is abandoned like a handler, cancelled and its
   * connection destroyed (`abandoned`: its outcome is unknown). Past the hard stop, no
   * COMMIT starts (`not-sent`: rolled back, nothing applied).
   */
  private async commitBeforeHardStop(
    xid: string,
    beforeCommit: string | undefined,
  ): Promise<CommitOutcome | 'not-sent' | 'abandoned'> {
    if (this.deps.hardStop.aborted) {
      await this.rollback();
      return 'not-sent';
    }
    const outcome = await this.untilHardStop(commitClaim(this.client, xid, beforeCommit));
    return outcome === undefined ? 'abandoned' : outcome;
  }

  /**
   * `work`, a statement running on this connection, unless the shutdown's hard stop
   * comes first: then the statement is cancelled on the server, the connection marked
   * for destruction, and the answer is undefined. For what may block without end on
   * the server: a COMMIT, a claim waiting on a key another instance holds.
   */
  async untilHardStop<T>(work: Promise<T>): Promise<T | undefined> {
    const stop = this.deps.hardStop;
    if (stop.aborted) {
      work.catch(() => undefined);
      this.abandon(new ShutdownError(this.key));
      return undefined;
    }
    let onStop: (() => void) | undefined;
    const stopped = new Promise<undefined>((resolve) => {
      onStop = () => resolve(undefined);
      stop.addEventListener('abort', onStop, { once: true });
    });
    try {
      const outcome = await Promise.race([work, stopped]);
      if (outcome === undefined) {
        // Its answer (the cancel's error, most likely) has nobody left to hear it.
        work.catch(() => undefined);
        this.abandon(new ShutdownError(this.key));
      }
      return outcome;
    } finally {
      stop.removeEventListener('abort', onStop!);
    }
  }

  /**
   * The server ended this session because of this transaction's own idleness or length
   * (25P03 idle_in_transaction_session_timeout, 25P04 transaction_timeout): the
   * message's failure, an attempt spent, and the database not marked down. The server
   * sends that FATAL before it closes the socket, so it is what pg reports first: as
   * the client's error event when the session sat idle (the close that follows comes
   * second), or as the answer to the statement that was running (`thrown`, or the
   * guard's first error when the handler caught it). A session ended any other way
   * (terminated, crashed, a dropped socket) has no such error and stays infrastructure.
   */
  private timedOut(thrown: unknown): FailedAttempt | undefined {
    // `thrown` only from a dead session: a live one was not ended (the handler's error
    // may come from a connection of its own).
    const cause = [this.lost, this.alive ? undefined : thrown, this.guard.firstError].find(
      isTransactionTimeout,
    );
    if (cause === undefined) return undefined;
    this.markBroken(cause);
    return handlersFault(new TransactionAbortedError(this.key, 'timed-out', cause));
  }

  /** An earlier statement of the handler's aborted the transaction: its failure, an attempt spent. */
  private aborted(): FailedAttempt {
    const first = this.guard.firstError;
    return {
      kind: 'failed',
      error: new TransactionAbortedError(this.key, 'aborted', first),
      infrastructure: false,
      conflict: isSerializationFailure(first),
    };
  }

  /**
   * The handler is given up on while it may still be running a statement: cancel that
   * on the server (else the backend keeps working and holds the claim's row lock until
   * it next touches its socket), and mark the connection for destruction on close. The
   * cancel is the protocol's own request on a socket of its own, outside the pool, and
   * nothing waits for it: the delivery's answer must not wait for a free connection.
   */
  private abandon(reason: Error): void {
    this.markBroken(reason);
    // One cancel per connection: a rollback raced inside another race meets the same stop.
    if (this.lost !== undefined || this.abandoned) return;
    this.abandoned = true;
    this.cancelling = cancelBackend(this.client, this.deps.pool, CANCEL_TIMEOUT_MS).catch(
      (err: unknown) =>
        this.deps.logger.warn(
          { err, key: this.key },
          'effectively-once: could not cancel an abandoned handler',
        ),
    );
  }

  private markBroken(cause: unknown): void {
    this.broken ??= cause ?? new Error('connection broken');
  }

  private markDownIfUnavailable(cause: unknown): void {
    if (isUnavailable(cause)) this.deps.health.markDown(cause);
  }
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
