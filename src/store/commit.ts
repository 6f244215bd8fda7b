import type { PoolClient, QueryResult } from 'pg';
import { IN_FAILED_TRANSACTION, isStatementError, sqlstateOf } from './pg-errors.js';

/**
 * How a claim's COMMIT ended, as far as the database told us:
 * - `committed`: the claim (and the effect with it) is durable;
 * - `aborted`: the transaction was already aborted by a failed statement (Postgres would
 *   have answered COMMIT with ROLLBACK); nothing committed;
 * - `rejected`: COMMIT itself failed with an ERROR (deferred constraint, serialization
 *   failure) and rolled back; the connection is fine;
 * - `ended`: the transaction holding the claim was ended by someone else (the handler)
 *   before COMMIT; `committed` says whether that transaction committed;
 * - `unknown`: the connection died while COMMIT was on the wire.
 */
export type CommitOutcome =
  | { kind: 'committed' }
  | { kind: 'aborted' }
  | { kind: 'rejected'; error: unknown }
  | { kind: 'ended'; committed: boolean }
  | { kind: 'unknown'; error: unknown };

// Raised (as an unrecognized setting, 42704) by the check below when the transaction
// running is not the one that holds the claim. A stable function, so the planner does
// not evaluate it ahead of the CASE.
const NOT_OURS = 'effectively_once.claim_not_in_this_transaction';

/**
 * Commits the transaction that holds a claim, and knows rather than assumes that it
 * did. One round trip: a check that the running transaction is still `xid` (the one
 * the claim was inserted in; it raises otherwise, so the COMMIT after it is skipped),
 * then COMMIT, whose command tag must say COMMIT. The only unknown outcome left is a
 * connection that died with the COMMIT on the wire.
 *
 * `last`, when given, is one more statement of the library's own (an HTTP endpoint's
 * stored response) run in the same round trip after the check and before COMMIT: it
 * only runs in the claim's transaction, and an error it raises rolls everything back
 * (outcome `rejected`).
 */
export async function commitClaim(
  client: PoolClient,
  xid: string,
  last?: string,
): Promise<CommitOutcome> {
  if (!/^\d+$/.test(xid)) return { kind: 'unknown', error: new Error(`odd xid "${xid}"`) };
  let results: unknown;
  try {
    results = await client.query(commitClaimSql(xid, last));
  } catch (error) {
    return afterError(client, error, xid);
  }
  const list = results as QueryResult[];
  const expected = last === undefined ? 2 : 3;
  const tag =
    Array.isArray(list) && list.length === expected ? list[expected - 1]?.command : undefined;
  if (tag === 'COMMIT') return { kind: 'committed' };
  if (tag === 'ROLLBACK') return { kind: 'aborted' };
  return { kind: 'unknown', error: new Error(`unexpected answer to COMMIT (${String(tag)})`) };
}

/**
 * The round trip commitClaim sends: the check that `xid` (digits, checked by the
 * caller) still runs, `last`, COMMIT. Exported for the HTTP bench's pgbench replay.
 */
export function commitClaimSql(xid: string, last?: string): string {
  return `${xidCheckSql(xid)};${last === undefined ? '' : ` ${last};`} COMMIT;`;
}

/**
 * The check that the running transaction is still `xid` (digits, checked by the
 * caller), the one the claim was inserted in: one statement that raises an error
 * {@link isNotOurs} recognises when it is not (another transaction, or none).
 */
export function xidCheckSql(xid: string): string {
  return (
    `SELECT CASE WHEN pg_current_xact_id_if_assigned() IS NOT DISTINCT FROM '${xid}'::xid8` +
    ` THEN '' ELSE current_setting('${NOT_OURS}') END`
  );
}

/** The error {@link xidCheckSql} raises: the claim's transaction is not the one running. */
export function isNotOurs(error: unknown): boolean {
  return sqlstateOf(error) === '42704' && String((error as Error).message).includes(NOT_OURS);
}

async function afterError(client: PoolClient, error: unknown, xid: string): Promise<CommitOutcome> {
  if (!isStatementError(error)) return { kind: 'unknown', error };
  // The session is alive. Whatever transaction is open now is not one to keep.
  try {
    await client.query('ROLLBACK');
  } catch (rollbackError) {
    if (!isStatementError(rollbackError)) return { kind: 'unknown', error: rollbackError };
  }
  const code = sqlstateOf(error);
  if (code === IN_FAILED_TRANSACTION) return { kind: 'aborted' };
  if (isNotOurs(error)) {
    try {
      const { rows } = await client.query<{ status: string | null }>(
        `SELECT pg_xact_status('${xid}'::xid8) AS status`,
      );
      const status = rows[0]?.status;
      if (status === 'committed') return { kind: 'ended', committed: true };
      if (status === 'aborted') return { kind: 'ended', committed: false };
      return { kind: 'unknown', error: new Error(`transaction ${xid} is "${String(status)}"`) };
    } catch (statusError) {
      return { kind: 'unknown', error: statusError };
    }
  }
  return { kind: 'rejected', error };
}
