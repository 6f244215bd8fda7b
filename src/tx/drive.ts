import { HandlerTimeoutError, ShutdownError } from '../errors.js';
import { guardedCall } from '../guarded-call.js';
import type { RouteTarget } from '../routing/options.js';
import {
  infra,
  type ClaimSession,
  type ClaimTransaction,
  type ClaimTransactions,
  type FailedAttempt,
  type Released,
  type TransactionEnd,
  type WorkResult,
} from './claim-transaction.js';

// The claim transaction's sequence, once for the three doors (the consumer's runner, its
// batch runner, the HTTP engine): open → claim → what the claim found → the user's work
// → verified COMMIT (or rollback) → close. Each door keeps only what is its own (what its
// claim statement is, what a key seen before means, what the work is, what a commit
// means for its answer) and says so through a ClaimPlan. The conflict loop around it
// is conflicts.ts's. The transaction itself is reached only through ClaimTransaction.

/** The steps of one transaction a door may trace (the consumer's telemetry). */
export type DriveStep = 'transaction' | 'claim' | 'handler' | 'commit';

/** How a door traces the driver's steps: `fn`'s run, and its failure read off its result. */
export interface Steps {
  step<R>(name: DriveStep, fn: () => Promise<R>, failure?: (result: R) => unknown): Promise<R>;
}

/** No tracing: each step just runs. */
export const untraced: Steps = { step: (_name, fn) => fn() };

/**
 * The door ended the transaction itself (rolled back, or handed the transaction on with
 * `keepOpen`: then the door closes it) and has its verdict.
 */
export interface Done<V> {
  kind: 'done';
  verdict: V | FailedAttempt | Released;
  /** The door took the transaction over (it closes it later): the driver does not close it. */
  keepOpen?: boolean;
}

/** The claim is the transaction's: run the work under it (`xid`: the claim's transaction id). */
export interface Claimed {
  kind: 'run';
  xid: string;
}

/** What a door brings to one claim transaction. `C`: what its claim statement returns. */
export interface ClaimPlan<C, V extends { kind: string }, Tx> {
  /** The key claimed (the first one of a batch): for the errors of a released transaction. */
  readonly key: string;
  /**
   * What a routed door's route sees of the work (the key's scope, the delivery or the
   * request); absent: the key alone, in no scope. Every key of a batch routes alike (the
   * batch runner groups them by database first).
   */
  readonly target?: RouteTarget;
  /** How long the claim may wait on the key's row lock (for the busy claim's error). */
  readonly claimWaitMs: number;
  /**
   * The claim: statement(s) on the transaction's library client (one round trip on the
   * library's pg client; single statements, the transaction found open, in a data
   * layer's: see {@link ClaimSession}), bounded by the hard stop (cancelled and given up
   * on); a throw is filed by `claimFailed`. Never undefined.
   */
  claim(session: ClaimSession): Promise<C>;
  /** What the claim found: run the work, or the door's verdict (a key seen before). */
  claimed(found: C, transaction: ClaimTransaction<Tx>): Promise<Claimed | Done<V>>;
  /**
   * The user's work inside the transaction, usually through {@link runWork}, and what the
   * library adds to it (an adapter's hook, a stored response): what `finish` commits or
   * rolls back, or a verdict of the door's own that ended the transaction itself.
   */
  work(transaction: ClaimTransaction<Tx>, xid: string): Promise<WorkResult | Done<V>>;
  /**
   * What the transaction's end means for the door; `durationMs` from the work's start to
   * the end of the COMMIT. Called with the transaction still open for a statement of the
   * library's own after a commit (it is closed after).
   */
  ended(
    end: TransactionEnd,
    work: WorkResult,
    durationMs: number,
    transaction: ClaimTransaction<Tx>,
  ): Promise<V | FailedAttempt | Released>;
}

/**
 * One claim transaction of `plan`'s, from open to close: the claim (given up on at the
 * hard stop, its failure filed), what it found, nothing started past the hard stop, the
 * work, then COMMIT or rollback by `finish`. Never throws what the transaction's own
 * failures are: those are FailedAttempt or Released.
 */
export function driveTransaction<C, V extends { kind: string }, Tx>(
  transactions: ClaimTransactions<Tx>,
  plan: ClaimPlan<C, V, Tx>,
  steps: Steps = untraced,
): Promise<V | FailedAttempt | Released> {
  return steps.step<V | FailedAttempt | Released>(
    'transaction',
    async () => {
      // Routing: the key's own database, chosen here once for every door; the rest of the
      // sequence (replica hold included) runs on that database's transactions alone.
      const routed = transactions.at?.(plan.target ?? { key: plan.key, scope: '' });
      if (routed !== undefined && 'kind' in routed) return routed;
      return heldForReplica(routed ?? transactions, plan, steps);
    },
    failureOf,
  );
}

/**
 * `replicaSafe`: the verdict is held until the standby has every commit made before the
 * transaction opened, its own included, so that what the door then says (ack, answer)
 * survives a failover; a duplicate's too, since the claim it found may be as fresh. Not
 * confirmed (hold): the verdict becomes an unknown COMMIT, settled by the redelivery.
 */
async function heldForReplica<C, V extends { kind: string }, Tx>(
  transactions: ClaimTransactions<Tx>,
  plan: ClaimPlan<C, V, Tx>,
  steps: Steps,
): Promise<V | FailedAttempt | Released> {
  const replica = transactions.replica;
  if (replica === undefined) return transaction(transactions, plan, steps);
  const ticket = replica.begin();
  const verdict = await transaction(transactions, plan, steps);
  if (verdict.kind === 'failed' || verdict.kind === 'released') return verdict;
  const unconfirmed = await replica.confirm(ticket, plan.key);
  return unconfirmed === undefined ? verdict : infra(unconfirmed);
}

async function transaction<C, V extends { kind: string }, Tx>(
  transactions: ClaimTransactions<Tx>,
  plan: ClaimPlan<C, V, Tx>,
  steps: Steps,
): Promise<V | FailedAttempt | Released> {
  const opened = await transactions.open(plan.key);
  if (isEnded(opened)) return opened;
  const conn = opened;
  let keepOpen = false;
  try {
    let found: C | undefined;
    try {
      // A claim can wait without end (a key another instance holds, a database that
      // answers nothing): at the hard stop it is given up on, cancelled and released.
      const session: ClaimSession = {
        sql: conn.client,
        pg: conn.pg,
        begins: transactions.claimBegins,
      };
      found = await steps.step('claim', () => conn.untilHardStop(plan.claim(session)));
    } catch (cause) {
      return await conn.claimFailed(cause, plan.claimWaitMs);
    }
    if (found === undefined) return released(plan.key);
    const next = await plan.claimed(found, conn);
    if (next.kind === 'done') {
      keepOpen = next.keepOpen === true;
      return next.verdict;
    }
    // Nothing starts past the hard stop: a claim that got the row only then (the lock
    // an abandoned original held was freed by its destroyed connection) runs nothing.
    if (transactions.hardStop.aborted) {
      await conn.rollback();
      return released(plan.key);
    }
    const { xid } = next;
    const synchronousCommit = transactions.replica?.synchronousCommit;
    if (synchronousCommit !== undefined) {
      try {
        // This transaction's COMMIT only waits for the synchronous standbys.
        await conn.client.query(`SELECT set_config('synchronous_commit', $1, true)`, [
          synchronousCommit,
        ]);
      } catch (cause) {
        return await conn.claimFailed(cause, plan.claimWaitMs);
      }
    }
    const started = performance.now();
    const work = await steps.step('handler', () => plan.work(conn, xid), workFailure);
    if (work.kind === 'done') {
      keepOpen = work.keepOpen === true;
      return work.verdict;
    }
    const end =
      work.kind === 'ok'
        ? await steps.step('commit', () => conn.finish(work, xid), failureOf)
        : await conn.finish(work, xid);
    return await plan.ended(end, work, performance.now() - started, conn);
  } catch (thrown) {
    // Something of the library's own threw (a telemetry hook, a door's verdict) with the
    // transaction in an unknown state. Returned to the pool open, its claim would commit
    // with the next checkout's work and this key be acked unprocessed: destroy it.
    if (!keepOpen) conn.close(thrown ?? new Error('the claim transaction threw'));
    keepOpen = true;
    throw thrown;
  } finally {
    if (!keepOpen) conn.close();
  }
}

/** How the user's code ended, before the library adds its own work (a hook, a stored response). */
export type UserWork =
  Extract<WorkResult, { kind: 'timeout' | 'stopped' | 'threw' }> | { kind: 'ok' };

/** What {@link runWork} needs besides the code. */
export interface WorkOptions {
  /** The code's deadline; 0: none. */
  readonly timeoutMs: number;
  /** The owner's hard stop: the code is given up on at once (the transaction's `hardStop`). */
  readonly hardStop: AbortSignal;
  /** Signals the code's own signal also follows (the consumer: the delivery's signal). */
  readonly signalParents?: ReadonlyArray<AbortSignal | undefined>;
  /** The attempt a throw is filed under (the delivery's broker attempt, the request's run). */
  readonly attempt: number;
}

/**
 * Runs the user's code on the transaction's `tx` under a timeout and the hard stop, with
 * an abort signal read through `link` (created only when read). When `code` settles,
 * `tx` is sealed and what it left running is waited for (`settleTx`), as part of the
 * work: a floating statement counts against the timeout. `then` (the HTTP door's read
 * of the response body) runs after, still within the timeout. Its end is mapped once:
 * timeout, stopped (a throw at or after the hard stop: the code was given up on), threw.
 */
export async function runWork<Tx, R>(
  conn: ClaimTransaction<Tx>,
  options: WorkOptions,
  code: (tx: Tx, link: { readonly signal: AbortSignal }) => Promise<R>,
  then?: (value: R) => Promise<void>,
): Promise<UserWork> {
  const { timeoutMs, hardStop } = options;
  const timeoutError = (): HandlerTimeoutError => new HandlerTimeoutError(conn.key, timeoutMs);
  const tx = conn.tx;
  const result = await guardedCall(
    async (link) => {
      let value: R;
      try {
        value = await code(tx, link);
      } finally {
        // What it left running on tx is still its work: under its timeout and the hard stop;
        // a query it left floating is refused, not autocommitted.
        await conn.settleTx();
      }
      if (then !== undefined) await then(value);
    },
    {
      timeoutMs,
      abandonOn: hardStop,
      ...(options.signalParents !== undefined ? { parents: options.signalParents } : {}),
      timeoutReason: timeoutError,
    },
  );
  if (result.kind === 'timeout') return { kind: 'timeout', error: timeoutError() };
  if (result.kind === 'error') {
    if (hardStop.aborted) return { kind: 'stopped' };
    return { kind: 'threw', error: result.error, attempt: options.attempt };
  }
  return OK;
}

const OK: UserWork = { kind: 'ok' };

/** What a step's telemetry reports as its failure: the error of a failed or released end. */
export function failureOf(end: { kind: string; error?: unknown }): unknown {
  return end.kind === 'failed' || end.kind === 'released' ? end.error : undefined;
}

/** The failure of the handler step (the handler threw, timed out, or the hook failed). */
export function workFailure(work: WorkResult | Done<unknown>): unknown {
  switch (work.kind) {
    case 'ok':
      return undefined;
    case 'done':
      return failureOf(work.verdict as { kind: string; error?: unknown });
    case 'stopped':
      return new Error('stopped: the consumer is shutting down');
    default:
      return work.error;
  }
}

function released(key: string): Released {
  return { kind: 'released', error: new ShutdownError(key) };
}

function isEnded<Tx>(
  opened: ClaimTransaction<Tx> | FailedAttempt | Released,
): opened is FailedAttempt | Released {
  const kind = (opened as { kind?: unknown }).kind;
  return kind === 'failed' || kind === 'released';
}
