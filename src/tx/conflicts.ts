import { conflictDelay } from '../backoff.js';
import { DatabaseError, ShutdownError } from '../errors.js';
import { sleep } from '../sleep.js';
import type { FailedAttempt, Released } from './claim-transaction.js';

/**
 * What a door does with a transaction that lost a serialization race (a serialization
 * failure or a deadlock, `FailedAttempt.conflict`): it is run again in place, in a fresh
 * transaction, up to `retries` times; these say what differs between the doors.
 */
export interface ConflictPolicy {
  /** How many times a lost race is run again in place (`serializationRetries`). */
  readonly retries: number;
  /**
   * What a race still lost after `retries` becomes:
   * - `'spend-attempt'` (the consumer): the message's failure like a handler error, an
   *   attempt spent, wherever it came from (a claim's conflict is otherwise
   *   infrastructure); one over the library's own row (`ownRow`) stays infrastructure.
   *   The broker redelivers it later, with backoff.
   * - `'infrastructure'` (HTTP): a `DatabaseError` on the serialization failure, no
   *   attempt spent (a request has no attempt to spend; the client is told to retry).
   */
  readonly exhausted: 'spend-attempt' | 'infrastructure';
  /**
   * When aborted, a lost race is not run again and its failure is returned as it is,
   * not exhausted (the consumer's delivery signal: the broker took the message back).
   */
  readonly stopOn?: AbortSignal | undefined;
  /** Told before each run again (the consumer's `serializationRetries` counter). */
  readonly onRetry?: (() => void) | undefined;
}

/**
 * Runs `run` (one claim transaction; `attempt`: 1 for the first run, counting the runs
 * again) again while it fails with a conflict, as `policy` says, waiting
 * `conflictDelay(n)` before the n-th run again. The hard stop ends the wait: released.
 */
export async function retryConflicts<V extends { kind: string }>(
  run: (attempt: number) => Promise<V | FailedAttempt | Released>,
  policy: ConflictPolicy,
  hardStop: AbortSignal,
  key: string,
): Promise<V | FailedAttempt | Released> {
  for (let conflicts = 0; ; conflicts++) {
    const end = await run(conflicts + 1);
    if (end.kind !== 'failed' || !(end as FailedAttempt).conflict) return end;
    const failed = end as FailedAttempt;
    if (policy.stopOn?.aborted === true) return failed;
    if (conflicts >= policy.retries) return conflictsExhausted(failed, policy.exhausted);
    policy.onRetry?.();
    await sleep(conflictDelay(conflicts + 1), hardStop);
    if (hardStop.aborted) return { kind: 'released', error: new ShutdownError(key) };
  }
}

/** A conflict still lost after the runs again in place, as `policy` files it (see ConflictPolicy). */
export function conflictsExhausted(
  failed: FailedAttempt,
  policy: ConflictPolicy['exhausted'],
): FailedAttempt {
  if (policy === 'spend-attempt') return { ...failed, infrastructure: failed.ownRow === true };
  return {
    kind: 'failed',
    error: new DatabaseError('transaction (serialization failure)', failed.error),
    infrastructure: true,
    conflict: false,
  };
}
