import type { Pool } from 'pg';
import { sleep } from '../sleep.js';
import { acquireClient } from './acquire.js';
import type { OutsideCommit } from './claim-transaction.js';

/**
 * How long a transaction whose session the server just ended may still read as
 * "in progress": the backend sends its FATAL before it exits, and it records the
 * abort only on its way out. Past this, the outcome stays unknown.
 */
const SETTLE_MS = 10_000;
const POLL_MS = 20;

/** What `pg_xact_status` says of a transaction, once it has ended; `unknown` otherwise. */
export type SettledStatus =
  { kind: 'committed' } | { kind: 'aborted' } | { kind: 'unknown'; why: unknown };

/**
 * Whether transaction `xid` committed, read once on another connection of `pool`:
 * `in progress` and `aborted` are `not-committed`; no free connection within
 * `acquireTimeoutMs`, an error or a status the server no longer keeps are `unknown`.
 */
export async function committedOnPool(
  pool: Pool,
  xid: string,
  acquireTimeoutMs: number,
  signal: AbortSignal,
): Promise<OutsideCommit> {
  if (!/^\d+$/.test(xid)) return 'unknown';
  let client;
  try {
    client = await acquireClient(pool, acquireTimeoutMs, signal);
  } catch {
    return 'unknown';
  }
  let failure: unknown;
  try {
    const { rows } = await client.query<{ status: string | null }>(
      'SELECT pg_xact_status($1::xid8) AS status',
      [xid],
    );
    const status = rows[0]?.status ?? null;
    if (status === 'committed') return 'committed';
    return status === 'in progress' || status === 'aborted' ? 'not-committed' : 'unknown';
  } catch (error) {
    failure = error;
    return 'unknown';
  } finally {
    client.release(failure instanceof Error ? failure : undefined);
  }
}

/**
 * Asks the server, on another connection of `pool`, how transaction `xid` (an xid8, in
 * digits) ended: for a COMMIT whose answer was lost with its session. Polled while the
 * transaction still reads "in progress" (its backend has not finished exiting), for at
 * most SETTLE_MS or until `signal` aborts; no free connection within `acquireTimeoutMs`,
 * an error, or a status the server no longer keeps (NULL) leave it `unknown`.
 */
export async function settledStatus(
  pool: Pool,
  xid: string,
  acquireTimeoutMs: number,
  signal: AbortSignal,
): Promise<SettledStatus> {
  if (!/^\d+$/.test(xid)) return { kind: 'unknown', why: new Error(`odd xid "${xid}"`) };
  let client;
  try {
    client = await acquireClient(pool, acquireTimeoutMs, signal);
  } catch (error) {
    return { kind: 'unknown', why: error };
  }
  let failure: unknown;
  try {
    const deadline = Date.now() + SETTLE_MS;
    for (;;) {
      const { rows } = await client.query<{ status: string | null }>(
        'SELECT pg_xact_status($1::xid8) AS status',
        [xid],
      );
      const status = rows[0]?.status ?? null;
      if (status === 'committed' || status === 'aborted') return { kind: status };
      if (status !== 'in progress' || Date.now() >= deadline || signal.aborted)
        return { kind: 'unknown', why: new Error(`transaction ${xid} is "${String(status)}"`) };
      await sleep(POLL_MS, signal);
    }
  } catch (error) {
    failure = error;
    return { kind: 'unknown', why: error };
  } finally {
    client.release(failure instanceof Error ? failure : undefined);
  }
}
