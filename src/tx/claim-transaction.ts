import type { Pool, PoolClient } from 'pg';
import type { RouteTarget } from '../routing/options.js';
import type { SqlRunner } from '../data-layer.js';
import type { ReplicaGuard } from '../replica/guard.js';
import type {
  EffectivelyOnceError,
  HandlerTimeoutError,
  TransactionControlError,
} from '../errors.js';

// The seam between the claim-transaction driver (drive.ts: claim → the user's work →
// verified COMMIT, the same for the three doors) and how one claim transaction is had.
// Today one implementation: ClaimConnection (claim-connection.ts), a transaction the
// library opens on a pg client of its pool. The data layers of the next issue plug in
// here too: a transaction the user's layer opens (`prisma.$transaction`, `knex.transaction`,
// `sql.begin`) in which the library claims, or one the library opens on a pg connection and
// binds the layer to. The driver talks to a transaction only through this interface.

/** A failed attempt at a claim transaction, as every door reports it. */
export interface FailedAttempt {
  kind: 'failed';
  error: EffectivelyOnceError;
  /**
   * Not the message's fault, so no attempt is spent: our connection died, the database
   * is down, the claim is busy, the COMMIT's outcome is unknown.
   */
  infrastructure: boolean;
  /** A serialization failure or deadlock: worth running again at once, in a fresh transaction. */
  conflict: boolean;
  /**
   * The conflict was over the library's own row (an adapter hook's: the stored Kafka
   * offset, which every transaction of a partition raises), not the message's work:
   * past `serializationRetries` it stays infrastructure instead of spending an attempt.
   */
  ownRow?: boolean;
}

/** A failure the message's handling caused: it spends an attempt. */
export function handlersFault(error: EffectivelyOnceError): FailedAttempt {
  return { kind: 'failed', error, infrastructure: false, conflict: false };
}

/** A failure that is not the message's (ours, the database's): no attempt spent. */
export function infra(error: EffectivelyOnceError): FailedAttempt {
  return { kind: 'failed', error, infrastructure: true, conflict: false };
}

/** What {@link ClaimTransaction.committedOutside} found of the claim's transaction. */
export type OutsideCommit = 'committed' | 'not-committed' | 'unknown';

/** The work must go back untouched: the owner is stopping (its hard stop came). */
export interface Released {
  kind: 'released';
  error: EffectivelyOnceError;
}

/** How a claim transaction ended, before the broker (or the HTTP client) hears of it. */
export type TransactionEnd =
  | {
      kind: 'committed';
      /** Set when the commit happened, but not the way it should have (the handler committed). */
      warning: EffectivelyOnceError | undefined;
    }
  | FailedAttempt
  | Released;

/** One statement with `$1…` placeholders and their values. */
export interface BoundStatement {
  readonly text: string;
  readonly values: readonly unknown[];
}

/** How the user's code inside the transaction (handler, then the adapter's hook) ended. */
export type WorkResult =
  | {
      kind: 'ok';
      /**
       * The library's statement(s) to run in the transaction right before COMMIT (see
       * commitClaim): text for the library's own client, which sends it in one round trip
       * with the xid check and COMMIT; one statement with its values for a data layer.
       */
      beforeCommit?: string | BoundStatement;
    }
  | { kind: 'timeout'; error: HandlerTimeoutError }
  | { kind: 'stopped' }
  | { kind: 'threw'; error: unknown; attempt: number }
  | { kind: 'hook-failed'; error: unknown };

/**
 * One claim transaction, from the moment it is open (a connection or the user's
 * transaction is in hand) to its release. What the driver needs from it, and what each
 * implementation must hold to, whoever opened the transaction:
 *
 * - **One transaction.** {@link client}'s statements (the claim, the library's reads and
 *   writes, the stored response) and {@link tx}'s (the handler's) run in the same
 *   database transaction, so the claim, the effect and the stored answer commit
 *   together or not at all.
 * - **The claim's xid proves it.** The claim statement returns the transaction's id
 *   (`pg_current_xact_id()`, an xid8 in digits), which the driver hands back to
 *   {@link finish}. Its COMMIT goes in the library's last round trip inside the
 *   transaction, after a check that the running transaction is still that xid (the pg
 *   implementation: the check, the door's last statement, COMMIT, in one simple query;
 *   see commitClaim), so a handler that ended the transaction itself (`COMMIT` through a
 *   path the guard did not see) never has its later effect committed as the claim's.
 * - **Known vs unknown COMMIT.** {@link finish} tells a COMMIT the server refused (a
 *   known rollback: `failed`) from one whose answer was lost (`CommitUnknownError`,
 *   infrastructure), and settles what it can by the xid with `pg_xact_status` asked
 *   on another connection (only where the server that answered is known to be the one
 *   that ran it: its own session timeouts).
 * - **Nothing of the handler's runs outside the claim.** {@link tx} refuses statements
 *   that end or replace the transaction and, once {@link sealTx} was called, every
 *   call; {@link settleTx} waits for what the handler left running, so a floating
 *   statement is answered (inside the claim) or refused, never autocommitted after.
 * - **Given up on means cancelled.** A timeout, or the hard stop during a statement
 *   ({@link untilHardStop}) or during the work (`finish` with `timeout`/`stopped`),
 *   cancels the statement on the server (by the backend's pid: the protocol's
 *   CancelRequest, or `pg_cancel_backend`) and destroys the connection on
 *   {@link close}, which ends the transaction server-side.
 * - **Failures are filed.** Every failure becomes a {@link FailedAttempt} saying whose
 *   fault it was (`infrastructure`) and whether to run again in place (`conflict`:
 *   serialization failure, deadlock); the driver decides what to do with a conflict.
 *
 * `Tx` is what handlers get as `ctx.tx`: a guarded pg client today, the data layer's own
 * transaction object later.
 */
export interface ClaimTransaction<Tx = PoolClient> {
  /** The key the transaction claims (for errors and logs). */
  readonly key: string;
  /**
   * Runs the library's own statements inside the transaction (the claim, the stored
   * hash, the adapter hooks, the stored response after a handler's own COMMIT), one
   * statement per call; never given to the handler.
   */
  readonly client: SqlRunner;
  /**
   * The pg client under {@link client} when the library opened the transaction on a
   * client of its own pool: there a door may send several statements in one round trip
   * (its claim, which BEGINs the transaction). Undefined in a data layer's transaction.
   */
  readonly pg: PoolClient | undefined;
  /** What the handler gets as `ctx.tx`: the same transaction, behind the guard. */
  readonly tx: Tx;
  /**
   * The pool of the transaction's database (with routing: the key's), for a statement
   * of the library's that must run outside the transaction (after a handler's own COMMIT).
   */
  readonly pool: Pool;
  /**
   * `work`, a library statement running on the transaction, unless the hard stop comes
   * first: then it is cancelled on the server, the connection marked for destruction,
   * and the answer is undefined. For what may block without end: a claim waiting on a
   * key held elsewhere, a ROLLBACK on a silent database.
   */
  untilHardStop<T>(work: Promise<T>): Promise<T | undefined>;
  /** A claim statement failed (`waitMs`: how long it could wait on the key's lock): rolls back and files it. */
  claimFailed(cause: unknown, waitMs: number): Promise<FailedAttempt>;
  /** The handler's work is over: {@link tx} refuses every further call, from this tick on. */
  sealTx(): void;
  /**
   * {@link sealTx}, then resolves once what the handler left running through `tx` has
   * been answered and any late call it chained was refused ({@link lateUse}). Awaited
   * as part of the work, so a statement left running counts against the timeout.
   */
  settleTx(): Promise<void>;
  /** The first call on {@link tx} refused because it came after {@link sealTx}. */
  readonly lateUse: TransactionControlError | undefined;
  /**
   * Whether transaction `xid` (the claim's) has already committed, the handler having
   * ended it itself: asked after the handler failed, answered a rollback status or ran
   * out of time (`handlerMayRun`: it may still be running a statement, so nothing may
   * wait on its session). `unknown` when it cannot be told: never read as "not applied".
   */
  committedOutside(xid: string, handlerMayRun: boolean): Promise<OutsideCommit>;
  /**
   * Ends the transaction after the work: the verified COMMIT (against `xid`) when it
   * succeeded, ROLLBACK when it failed, cancel and destroy when it was given up on while
   * running; and says what that means.
   */
  finish(work: WorkResult, xid: string): Promise<TransactionEnd>;
  /** Rolls back; a transaction that cannot be rolled back is destroyed on {@link close}. */
  rollback(): Promise<void>;
  /**
   * Releases the connection, or destroys it when it may not be reused or when `failure`
   * is given: the library's own code threw with the transaction in an unknown state (a
   * claim inserted, maybe a handler's writes), and only a destroyed connection is sure to
   * end it. Called last; a second call does nothing (a pool's checkout is released once).
   */
  close(failure?: unknown): void;
}

/** Where claim transactions come from (a pool, a data layer), and the owner's hard stop. */
export interface ClaimTransactions<Tx = PoolClient> {
  /** Aborts when the owner's grace period ran out: what still runs is given up on. */
  readonly hardStop: AbortSignal;
  /**
   * Whether a door's claim must BEGIN the transaction (with the isolation level): true
   * for the library's own pool, whose claim round trip starts with BEGIN; false inside a
   * data layer's transaction, which {@link open} found open and set the isolation level
   * of (the claim then runs as single statements through {@link ClaimTransaction.client}).
   */
  readonly claimBegins: boolean;
  /**
   * Opens one claim transaction for `key`, or says why the work cannot run now. The
   * database transaction itself may begin with the claim (see {@link claimBegins}).
   */
  open(key: string): Promise<ClaimTransaction<Tx> | FailedAttempt | Released>;
  /**
   * `replicaSafe` on: the driver holds each verdict until the standby has what the
   * transaction saw and committed (or raises `synchronous_commit` inside it).
   */
  readonly replica?: ReplicaGuard | undefined;
  /**
   * Routing (`pool` given as a `Routing`): the claim transactions of the database the
   * target's key lives in, or the failed attempt that says why there is none (the route
   * threw, named an unknown database, or changed its mind about the key). The driver asks
   * once per transaction, before anything else; absent: one database, this one.
   */
  at?(target: RouteTarget): ClaimTransactions<Tx> | FailedAttempt;
}

/** The door's claim transactions, held for the standby by `replica` (undefined: off). */
export function withReplica<Tx>(
  transactions: ClaimTransactions<Tx>,
  replica: ReplicaGuard | undefined,
): ClaimTransactions<Tx> {
  if (replica === undefined) return transactions;
  return {
    get hardStop() {
      return transactions.hardStop;
    },
    claimBegins: transactions.claimBegins,
    open: (key) => transactions.open(key),
    replica,
    ...(transactions.at !== undefined ? { at: transactions.at.bind(transactions) } : {}),
  };
}

/** Where a door's claim statements run, and how they must be sent (see ClaimPlan.claim). */
export interface ClaimSession {
  /** One statement per call, inside the claim's transaction. */
  readonly sql: SqlRunner;
  /** Set when several statements may share a round trip: the library's own pg client. */
  readonly pg: PoolClient | undefined;
  /** The claim's first statement BEGINs the transaction ({@link ClaimTransactions.claimBegins}). */
  readonly begins: boolean;
}
