import type { Pool } from 'pg';
import type { DataLayer, LayerTransactionSettings, SqlResult, SqlRunner } from '../data-layer.js';
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
import type { IsolationLevel } from '../store/claim.js';
import { xidCheckSql } from '../store/commit.js';
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
import { topLevelStatements } from './sql-statements.js';
import { acquireClient } from './acquire.js';
import type { ConnectionDeps } from './claim-connection.js';
import type {
  BoundStatement,
  ClaimTransaction,
  ClaimTransactions,
  FailedAttempt,
  OutsideCommit,
  Released,
  TransactionEnd,
  WorkResult,
} from './claim-transaction.js';
import { handlersFault, infra } from './claim-transaction.js';
import { committedOnPool, settledStatus } from './xact-status.js';

// The claim transaction inside a data layer's own transaction (`prisma.$transaction`,
// `knex.transaction`, `sql.begin`…): see src/data-layer.ts and ARCHITECTURE.md.

/** What a layer's claim transactions need from their owner besides a pool's deps. */
export interface LayerDeps extends ConnectionDeps {
  /** Set by the transaction's first statement (`SET TRANSACTION ISOLATION LEVEL`). */
  readonly isolationLevel: IsolationLevel | undefined;
  /**
   * The door's limit on everything inside the transaction, in ms (0: none): the claim's
   * lock wait, the handler, the library's last statements and COMMIT. A transaction
   * limit of the layer's own is set from it (see LayerTransactionSettings.timeoutMs).
   */
  readonly timeoutMs: number;
}

/**
 * Headroom past the handler's timeout and the claim's lock wait for the rest of the
 * transaction: opening it, the library's statements, COMMIT and its read-back.
 */
const LAYER_TIMEOUT_SLACK_MS = 30_000;

/**
 * The limit a door gives the layer's own transaction (`LayerTransactionSettings.timeoutMs`):
 * never shorter than what the library lets run inside it; 0 (none) when the handler
 * has no timeout.
 */
export function layerTimeoutMs(handlerTimeoutMs: number, lockTimeoutMs: number): number {
  return handlerTimeoutMs === 0 ? 0 : handlerTimeoutMs + lockTimeoutMs + LAYER_TIMEOUT_SLACK_MS;
}

/**
 * The claim transactions of a data layer: each one the layer opens in its own idiom,
 * the claim found inside it (its statements one per call through `layer.sql(tx)`), and
 * `deps.pool` kept for what must run on another connection (a cancel, the settling of
 * a COMMIT whose answer was lost).
 */
export function layerClaimTransactions<Tx>(
  layer: DataLayer<Tx>,
  deps: LayerDeps,
): ClaimTransactions<Tx> {
  return {
    hardStop: deps.hardStop,
    claimBegins: false,
    open: (key) => LayerClaimTransaction.open(layer, deps, key),
  };
}

/** What the driver decided the layer's transaction is to do once the work is over. */
type Decision = 'commit' | 'rollback';

/** How the layer's `transaction(…)` promise settled. */
type Settled = { kind: 'resolved' } | { kind: 'rejected'; error: unknown };

/**
 * Thrown by the library's body to make the layer roll back: a rejection carrying it is
 * a rollback the library asked for. Private: nothing of the user's can throw it.
 */
const ROLLBACK = new Error('effectively-once: rolled back by the library');

/** Bound on the other connection's cancel (nothing waits for it). */
const CANCEL_TIMEOUT_MS = 5000;

/**
 * One claim transaction a data layer opened: the {@link ClaimTransaction} for a
 * transaction the library does not hold the connection of. The layer's
 * `transaction(settings, body)` is inverted: {@link LayerClaimTransaction.open} starts
 * it and gets the layer's transaction object from `body`, which then waits for the
 * driver's decision; {@link finish} runs the library's last statements inside it,
 * then lets `body` resolve (the layer sends COMMIT) or throw a private sentinel (the
 * layer rolls back), and reads the layer's promise.
 *
 * Nothing of the handler's can be guarded here: `ctx.tx` is the layer's own object,
 * so {@link sealTx} and {@link settleTx} do nothing and {@link lateUse} stays
 * undefined. What proves that the transaction COMMIT ends is still the claim's is the
 * xid check, the library's last statement inside it (a handler that committed or
 * rolled back the transaction itself makes it raise; one whose statement failed
 * makes it meet 25P02); and, since a layer reports a COMMIT the server answered with
 * ROLLBACK (an aborted transaction) as a success, what COMMIT did is read back by the
 * claim's xid with `pg_xact_status` on `deps.pool`, never assumed. A statement that
 * must be given up on (a timeout, the hard stop) has its backend ended with
 * `pg_terminate_backend` on `deps.pool`, by the backend pid read in the transaction and
 * only while that backend is still in this transaction (its start time read with it),
 * so a late cancel never reaches whoever reuses the connection.
 */
export class LayerClaimTransaction<Tx> implements ClaimTransaction<Tx> {
  /** {@inheritDoc ClaimTransaction.pg}: none, the layer holds the connection. */
  readonly pg = undefined;
  /** {@inheritDoc ClaimTransaction.lateUse}: a layer's `tx` cannot be guarded. */
  readonly lateUse = undefined;
  /** {@inheritDoc ClaimTransaction.client} */
  readonly client: SqlRunner;
  private decided: Decision | undefined;
  private backend: { pid: number; startedUs: string } | undefined;
  private cancelled = false;
  /** Set while an abandoned handler's backend is being ended: the rollback waits for it. */
  private ending: Promise<void> | undefined;
  private closed = false;

  /** {@inheritDoc ClaimTransaction.pool} */
  get pool(): Pool {
    return this.deps.pool;
  }

  private constructor(
    readonly key: string,
    readonly tx: Tx,
    private readonly layer: DataLayer<Tx>,
    private readonly deps: LayerDeps,
    private readonly decide: (decision: Decision) => void,
    private readonly outcome: Promise<Settled>,
  ) {
    const runner = layer.sql(tx);
    this.client = {
      query: <R extends object>(text: string, values?: readonly unknown[]) =>
        this.run<R>(runner, text, values),
    };
  }

  /**
   * Starts the layer's transaction and waits until its body runs (bounded by
   * `acquireTimeoutMs` and the hard stop), then sets the isolation level and reads the
   * backend's pid. Any failure before that: infrastructure, nothing applied.
   */
  static async open<Tx>(
    layer: DataLayer<Tx>,
    deps: LayerDeps,
    key: string,
  ): Promise<LayerClaimTransaction<Tx> | FailedAttempt | Released> {
    if (deps.hardStop.aborted) return { kind: 'released', error: new ShutdownError(key) };
    let decide!: (decision: Decision) => void;
    const decision = new Promise<Decision>((resolve) => (decide = resolve));
    let opened!: (tx: Tx) => void;
    const started = new Promise<Tx>((resolve) => (opened = resolve));
    const settings: LayerTransactionSettings = {
      timeoutMs: deps.timeoutMs,
      acquireTimeoutMs: deps.acquireTimeoutMs,
    };
    let outcome: Promise<Settled>;
    try {
      outcome = layer
        .transaction(settings, async (tx) => {
          opened(tx);
          if ((await decision) === 'rollback') throw ROLLBACK;
        })
        .then(
          (): Settled => ({ kind: 'resolved' }),
          (error: unknown): Settled => ({ kind: 'rejected', error }),
        );
    } catch (error) {
      // A layer that throws instead of rejecting.
      outcome = Promise.resolve({ kind: 'rejected', error });
    }
    const first = await raceOpen(started, outcome, deps);
    if (first.kind !== 'opened') {
      // Whenever the layer gets to the body after all, it rolls back at once.
      decide('rollback');
      if (first.kind === 'stopped') return { kind: 'released', error: new ShutdownError(key) };
      const cause = first.kind === 'failed' ? layer.serverError(first.error) : first.error;
      if (first.kind === 'failed') markDownIfUnavailable(deps, cause);
      return infra(
        cause instanceof DatabaseError
          ? cause
          : new DatabaseError('connect', cause, {
              key,
              dataLayer: layer.name,
              ...(first.kind === 'timedOut' ? { timedOut: true } : {}),
            }),
      );
    }
    const conn = new LayerClaimTransaction(key, first.tx, layer, deps, decide, outcome);
    return conn.begin();
  }

  /** The transaction's first statements: the isolation level, then who runs it. */
  private async begin(): Promise<this | FailedAttempt | Released> {
    const { isolationLevel } = this.deps;
    try {
      const read = async () => {
        // Before any query: Postgres takes the transaction's snapshot at the first one.
        if (isolationLevel !== undefined)
          await this.client.query(
            `SET TRANSACTION ISOLATION LEVEL ${isolationLevel.toUpperCase()}`,
          );
        return this.client.query<{ pid: unknown; started: unknown }>(
          'SELECT pg_backend_pid() AS pid,' +
            ' (extract(epoch FROM now()) * 1000000)::bigint::text AS started',
        );
      };
      const answer = await this.untilHardStop(read());
      if (answer === undefined) return { kind: 'released', error: new ShutdownError(this.key) };
      const row = answer.rows[0];
      const pid = Number(row?.pid);
      if (!Number.isInteger(pid) || typeof row?.started !== 'string')
        throw new Error('unexpected answer to the read of the backend pid');
      this.backend = { pid, startedUs: row.started };
      return this;
    } catch (error) {
      await this.rollback();
      this.markDownIfUnavailable(error);
      return infra(
        new DatabaseError('begin', error, { key: this.key, dataLayer: this.layer.name }),
      );
    }
  }

  /** {@inheritDoc ClaimTransaction.sealTx}: nothing to seal on a layer's own object. */
  sealTx(): void {}

  /** {@inheritDoc ClaimTransaction.settleTx}: nothing of the handler's can be followed. */
  settleTx(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * {@inheritDoc ClaimTransaction.committedOutside}: read on the library's pool, never
   * through the layer's transaction (which may refuse once the handler ended it, or be
   * running the handler's statement), so it is asked after a timeout too.
   */
  committedOutside(xid: string): Promise<OutsideCommit> {
    return committedOnPool(this.deps.pool, xid, this.deps.acquireTimeoutMs, this.deps.hardStop);
  }

  /** {@inheritDoc ClaimTransaction.claimFailed} */
  async claimFailed(cause: unknown, lockTimeoutMs: number): Promise<FailedAttempt> {
    await this.rollback();
    const error = this.layer.serverError(cause);
    const code = sqlstateOf(error) ?? '';
    if (code === LOCK_NOT_AVAILABLE)
      return infra(new ClaimBusyError(this.key, lockTimeoutMs, error));
    if (isSerializationFailure(error))
      return { ...infra(new DatabaseError('claim', error, { key: this.key })), conflict: true };
    // Data exceptions (22) and program limits (54) come from the key itself: dead-letter.
    if (code.startsWith('22') || code.startsWith('54'))
      return handlersFault(
        new InvalidKeyError(`Postgres cannot store it (${code}): ${describe(error)}`, {
          sqlstate: code,
        }),
      );
    if (!isStatementError(error)) this.markDownIfUnavailable(error);
    return infra(
      error instanceof EffectivelyOnceError
        ? error
        : new DatabaseError('claim', error, { key: this.key }),
    );
  }

  /** {@inheritDoc ClaimTransaction.finish} */
  async finish(work: WorkResult, xid: string): Promise<TransactionEnd> {
    switch (work.kind) {
      case 'ok':
        return this.commit(xid, work.beforeCommit);
      case 'timeout':
        // The handler may still run a statement: cancel it, roll back, wait for nothing.
        this.abandon();
        return handlersFault(work.error);
      case 'stopped':
        this.abandon();
        return { kind: 'released', error: new ShutdownError(this.key) };
      case 'hook-failed': {
        // The adapter's hook ran through the library's client: its error is server-shaped.
        const error = work.error;
        if (!(await this.alive(error))) return this.lostBeforeCommit(error);
        await this.rollback();
        if (sqlstateOf(error) === IN_FAILED_TRANSACTION) return this.aborted(error);
        if (isTransactionTimeout(error))
          return handlersFault(new TransactionAbortedError(this.key, 'timed-out', error));
        if (sqlstateOf(error) === READ_ONLY_SQL_TRANSACTION)
          return handlersFault(new TransactionAbortedError(this.key, 'read-only', error));
        return {
          ...infra(new DatabaseError('adapter in-transaction hook', error, { key: this.key })),
          conflict: isSerializationFailure(error),
          ownRow: true,
        };
      }
      case 'threw':
        return this.handlerFailed(work.error, work.attempt);
    }
  }

  /**
   * Rolls back through the layer (its body throws the sentinel) and waits for the
   * layer to finish, at most until the hard stop; then the statement still running is
   * cancelled and nothing waits longer.
   */
  async rollback(): Promise<void> {
    // An abandoned handler's backend is being ended: the layer rolls back once it is gone.
    if (this.ending !== undefined) await this.untilHardStop(this.ending);
    this.decideOnce('rollback');
    await this.untilHardStop(this.outcome);
  }

  /**
   * Ends what is left: a transaction nobody decided on rolls back; after a throw of
   * the library's own (`failure`), what it may still run is cancelled first.
   */
  close(failure?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    if (failure !== undefined) this.abandon();
    // An abandoned handler's backend is being ended: abandon() decides once it is gone.
    else if (this.ending === undefined) this.decideOnce('rollback');
  }

  /** {@inheritDoc ClaimTransaction.untilHardStop} */
  async untilHardStop<T>(work: Promise<T>): Promise<T | undefined> {
    const stop = this.deps.hardStop;
    if (stop.aborted) {
      work.catch(() => undefined);
      this.abandon();
      return undefined;
    }
    let onStop: (() => void) | undefined;
    const stopped = new Promise<undefined>((resolve) => {
      onStop = () => resolve(undefined);
      stop.addEventListener('abort', onStop, { once: true });
    });
    try {
      const outcome = await Promise.race([work, stopped]);
      if (outcome === undefined && stop.aborted) {
        work.catch(() => undefined);
        this.abandon();
      }
      return outcome;
    } finally {
      stop.removeEventListener('abort', onStop!);
    }
  }

  /**
   * The verified COMMIT: the xid check and the door's last statement as the library's
   * last statements inside the transaction, then the layer's COMMIT, then what it did
   * read back by the xid.
   */
  private async commit(
    xid: string,
    beforeCommit: string | BoundStatement | undefined,
  ): Promise<TransactionEnd> {
    if (this.deps.hardStop.aborted) {
      await this.rollback();
      return { kind: 'released', error: new ShutdownError(this.key) };
    }
    if (!/^\d+$/.test(xid)) {
      await this.rollback();
      return infra(new CommitUnknownError(this.key, new Error(`odd xid "${xid}"`)));
    }
    const last = await this.lastStatements(xid, beforeCommit);
    if (last !== undefined) return last;
    // From here on COMMIT may be on the wire: its outcome is known or unknown, never
    // "nothing applied" by assumption.
    this.decideOnce('commit');
    const settled = await this.untilHardStop(this.outcome);
    if (settled === undefined)
      return {
        kind: 'released',
        error: new CommitUnknownError(this.key, new ShutdownError(this.key)),
      };
    if (settled.kind === 'rejected') return this.commitRejected(settled.error, xid);
    // The layer says COMMIT went through; Postgres answers COMMIT in an aborted
    // transaction with ROLLBACK, which a layer reports as a success all the same.
    const status = await this.readBack(xid);
    if (status.kind === 'committed') return { kind: 'committed', warning: undefined };
    if (status.kind === 'aborted')
      return handlersFault(
        new TransactionAbortedError(
          this.key,
          'aborted',
          new Error(
            'COMMIT rolled back: a statement of the handler failed after the library checked the transaction',
          ),
        ),
      );
    this.logUnsettled(status.why);
    return this.commitUnknown(status.why);
  }

  /**
   * The xid check, then the door's statement(s), one per call. Undefined when both ran;
   * otherwise the transaction is rolled back (or was ended by the handler) and this is
   * what that means.
   */
  private async lastStatements(
    xid: string,
    beforeCommit: string | BoundStatement | undefined,
  ): Promise<TransactionEnd | undefined> {
    try {
      await this.lastStatement(xidCheckSql(xid));
    } catch (error) {
      if (error === STOPPED) return { kind: 'released', error: new ShutdownError(this.key) };
      // The only error of the check's own: the setting it reads when the transaction
      // running is not the claim's (42704). The handler ended the claim's transaction.
      if (sqlstateOf(error) === '42704' || endedByHandler(error)) return this.endedByHandler(xid);
      return this.failedBeforeCommit(error);
    }
    if (beforeCommit === undefined) return undefined;
    try {
      if (typeof beforeCommit !== 'string')
        await this.lastStatement(beforeCommit.text, beforeCommit.values);
      else
        for (const statement of topLevelStatements(beforeCommit))
          if (statement.trim() !== '') await this.lastStatement(statement);
    } catch (error) {
      if (error === STOPPED) return { kind: 'released', error: new ShutdownError(this.key) };
      if (isStatementError(error) && sqlstateOf(error) !== IN_FAILED_TRANSACTION) {
        await this.rollback();
        return {
          kind: 'failed',
          error: new CommitFailedError(this.key, error),
          infrastructure: false,
          conflict: isSerializationFailure(error),
        };
      }
      return this.failedBeforeCommit(error);
    }
    return undefined;
  }

  /** One of the last statements, given up on (and cancelled) at the hard stop. */
  private async lastStatement(text: string, values?: readonly unknown[]): Promise<void> {
    const answer = await this.untilHardStop(this.client.query(text, values));
    if (answer === undefined) throw STOPPED;
  }

  /** A last statement failed before COMMIT was let through: nothing of it committed. */
  private async failedBeforeCommit(error: unknown): Promise<TransactionEnd> {
    if (!(await this.alive(error))) return this.lostBeforeCommit(error);
    await this.rollback();
    if (sqlstateOf(error) === IN_FAILED_TRANSACTION) return this.aborted(error);
    if (sqlstateOf(error) === READ_ONLY_SQL_TRANSACTION && isServerError(error))
      return handlersFault(new TransactionAbortedError(this.key, 'read-only', error));
    return {
      kind: 'failed',
      error: new CommitFailedError(this.key, error),
      infrastructure: false,
      conflict: isSerializationFailure(error),
    };
  }

  /**
   * The xid check found another transaction running (or none): the handler committed
   * or rolled back the claim's transaction itself. The layer ends what runs now; the
   * claim's transaction, over by then, is asked about on another connection.
   */
  private async endedByHandler(xid: string): Promise<TransactionEnd> {
    await this.rollback();
    const status = await this.readBack(xid);
    if (status.kind === 'committed')
      return {
        kind: 'committed',
        warning: new TransactionControlError(
          "the handler committed the claim's transaction itself; what it ran after that ran outside it",
          { key: this.key },
        ),
      };
    if (status.kind === 'aborted')
      return handlersFault(new TransactionAbortedError(this.key, 'ended', undefined));
    this.logUnsettled(status.why);
    return this.commitUnknown(status.why);
  }

  /**
   * The layer's transaction rejected after COMMIT was let through. An ERROR the server
   * answered (a deferred constraint, a serialization failure) is a known rollback; the
   * session ended for the transaction's own idleness or length (25P03, 25P04) is
   * settled by the xid; anything else is unknown.
   */
  private async commitRejected(thrown: unknown, xid: string): Promise<TransactionEnd> {
    const error = this.layer.serverError(thrown);
    if (isStatementError(error))
      return {
        kind: 'failed',
        error: new CommitFailedError(this.key, error),
        infrastructure: false,
        conflict: isSerializationFailure(error),
      };
    if (isTransactionTimeout(error)) {
      const status = await this.readBack(xid);
      if (status.kind === 'committed') return { kind: 'committed', warning: undefined };
      if (status.kind === 'aborted')
        return handlersFault(new TransactionAbortedError(this.key, 'timed-out', error));
      this.logUnsettled(status.why);
    }
    return this.commitUnknown(error);
  }

  /**
   * The handler threw. Its fault (an attempt spent; run again at once on a
   * serialization failure), unless the transaction's connection is gone: then it says
   * nothing about the message (infrastructure).
   */
  private async handlerFailed(thrown: unknown, attempt: number): Promise<FailedAttempt> {
    const error = this.layer.serverError(thrown);
    const live = await this.alive(error);
    await this.rollback();
    if (isTransactionTimeout(error))
      return handlersFault(new TransactionAbortedError(this.key, 'timed-out', error));
    const failure =
      thrown instanceof EffectivelyOnceError ? thrown : new HandlerError(this.key, attempt, thrown);
    if (!live) {
      this.markDownIfUnavailable(error);
      return infra(failure);
    }
    return {
      kind: 'failed',
      error: failure,
      infrastructure: false,
      conflict: isSerializationFailure(error),
    };
  }

  /**
   * Whether the transaction's connection still answers, after `error`: an answer of
   * the server's at ERROR says so; otherwise the layer's transaction is asked (an
   * aborted one answers 25P02, which is an answer).
   */
  private async alive(error: unknown): Promise<boolean> {
    if (isServerError(error) && isStatementError(error)) return true;
    if (isServerError(error) && !isStatementError(error) && sqlstateOf(error) !== '25006')
      return false;
    if (this.decided !== undefined) return false;
    try {
      const answer = await this.untilHardStop(this.client.query('SELECT 1'));
      return answer !== undefined;
    } catch (probe) {
      return isStatementError(probe);
    }
  }

  /** The connection died before COMMIT was let through: nothing committed, not the message's fault. */
  private async lostBeforeCommit(error: unknown): Promise<FailedAttempt> {
    await this.rollback();
    if (isTransactionTimeout(error))
      return handlersFault(new TransactionAbortedError(this.key, 'timed-out', error));
    this.markDownIfUnavailable(error);
    return infra(
      new DatabaseError('connection (before COMMIT)', error, {
        key: this.key,
        dataLayer: this.layer.name,
      }),
    );
  }

  /** A statement of the handler's failed and it went on: its failure, an attempt spent. */
  private aborted(error: unknown): FailedAttempt {
    return handlersFault(new TransactionAbortedError(this.key, 'aborted', error));
  }

  private commitUnknown(cause: unknown): FailedAttempt {
    this.markDownIfUnavailable(cause);
    return infra(new CommitUnknownError(this.key, cause));
  }

  private logUnsettled(why: unknown): void {
    this.deps.logger.warn(
      { err: why, key: this.key },
      "effectively-once: could not settle a COMMIT by its transaction's id",
    );
  }

  /**
   * Given up on while the handler may still run (a timeout, the hard stop, a throw of the
   * library's own): end its backend on the server (another connection, nothing waits for
   * it), then let the layer roll back. Ending the backend, not cancelling a statement, is
   * what the library's own pool does by destroying the connection: the layer's
   * transaction object stays in the abandoned handler's hands, and a layer that released
   * a live connection would run the handler's next statement in autocommit (or inside
   * another claim that reused the connection), outside this claim. A dead connection runs
   * nothing more. The layer is told to roll back only once the backend is gone.
   */
  private abandon(): void {
    if (this.cancelled || this.backend === undefined) {
      this.decideOnce('rollback');
      return;
    }
    this.cancelled = true;
    this.ending = endOnServer(this.deps, this.backend)
      .catch((err: unknown) =>
        this.deps.logger.warn(
          { err, key: this.key },
          'effectively-once: could not end the backend of an abandoned handler',
        ),
      )
      .finally(() => this.decideOnce('rollback'));
  }

  /** What became of the claim's transaction `xid`, asked on the library's pool. */
  private readBack(xid: string): ReturnType<typeof settledStatus> {
    return settledStatus(this.deps.pool, xid, this.deps.acquireTimeoutMs, this.deps.hardStop);
  }

  private decideOnce(decision: Decision): void {
    if (this.decided !== undefined) return;
    this.decided = decision;
    this.decide(decision);
  }

  /**
   * A library statement through the layer; its failure comes back as the server error
   * inside (or as the layer's own error, for a lost connection). Refused once the
   * transaction was decided on: the layer may have handed its connection on.
   */
  private async run<R extends object>(
    runner: SqlRunner,
    text: string,
    values: readonly unknown[] | undefined,
  ): Promise<SqlResult<R>> {
    if (this.decided !== undefined)
      throw new TransactionControlError(
        "the claim's transaction in the data layer is over; nothing more runs in it",
        { key: this.key },
      );
    try {
      return await runner.query<R>(text, values);
    } catch (error) {
      throw this.layer.serverError(error);
    }
  }

  private markDownIfUnavailable(cause: unknown): void {
    markDownIfUnavailable(this.deps, cause);
  }
}

/** Thrown inside lastStatements when the hard stop gave up on a statement. */
const STOPPED = new Error('effectively-once: given up on at the hard stop');

/**
 * The layer's transaction opened (its body runs), failed before that, took longer
 * than `acquireTimeoutMs`, or the hard stop came first.
 */
async function raceOpen<Tx>(
  started: Promise<Tx>,
  outcome: Promise<Settled>,
  deps: LayerDeps,
): Promise<
  | { kind: 'opened'; tx: Tx }
  | { kind: 'failed'; error: unknown }
  | { kind: 'timedOut'; error: Error }
  | { kind: 'stopped' }
> {
  let timer: NodeJS.Timeout | undefined;
  let onStop: (() => void) | undefined;
  const limit = new Promise<{ kind: 'timedOut'; error: Error } | { kind: 'stopped' }>((resolve) => {
    timer = setTimeout(
      () =>
        resolve({
          kind: 'timedOut',
          error: new Error(
            `the data layer opened no transaction within ${deps.acquireTimeoutMs} ms`,
          ),
        }),
      deps.acquireTimeoutMs,
    );
    onStop = () => resolve({ kind: 'stopped' });
    deps.hardStop.addEventListener('abort', onStop, { once: true });
  });
  try {
    return await Promise.race([
      started.then((tx) => ({ kind: 'opened' as const, tx })),
      outcome.then((settled) => ({
        kind: 'failed' as const,
        error:
          settled.kind === 'rejected'
            ? settled.error
            : new Error('the data layer ended its transaction without running it'),
      })),
      limit,
    ]);
  } finally {
    clearTimeout(timer);
    deps.hardStop.removeEventListener('abort', onStop!);
  }
}

/**
 * `pg_terminate_backend` on another connection of the pool, only while the backend still
 * runs the transaction that started at `startedUs` (microseconds since the epoch): one
 * that arrives late must not reach whoever has the connection now.
 */
async function endOnServer(
  deps: LayerDeps,
  backend: { pid: number; startedUs: string },
): Promise<void> {
  const client = await acquireClient(deps.pool, CANCEL_TIMEOUT_MS, undefined);
  let failure: unknown;
  try {
    await client.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity' +
        ' WHERE pid = $1 AND (extract(epoch FROM xact_start) * 1000000)::bigint = $2::bigint',
      [backend.pid, backend.startedUs],
    );
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    client.release(failure instanceof Error ? failure : undefined);
  }
}

/**
 * A layer refused the library's statement because the handler ended the transaction
 * itself (Knex settles `trx` at the handler's own `trx.commit()`): as the xid check's
 * 42704, the claim's transaction is over and its xid says how.
 */
function endedByHandler(error: unknown): boolean {
  return (
    error instanceof TransactionControlError &&
    (error.details as { endedByHandler?: unknown } | undefined)?.endedByHandler === true
  );
}

/** An error with a server's answer in it (a SQLSTATE and a severity). */
function isServerError(error: unknown): boolean {
  return sqlstateOf(error) !== undefined;
}

function markDownIfUnavailable(deps: ConnectionDeps, cause: unknown): void {
  if (isUnavailable(cause)) deps.health.markDown(cause);
}
