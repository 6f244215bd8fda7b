import type { Pool } from 'pg';
import { DatabaseError } from '../errors.js';
import type { BodyOmitted } from '../http/store.js';
import { qualifiedTable, quoteIdentifier, type TableRef } from '../store/identifiers.js';
import { LOCK_NOT_AVAILABLE, sqlstateOf } from '../store/pg-errors.js';
import { guardClient } from '../tx/acquire.js';

/** A committed claim of a key. */
export interface CommittedClaim {
  consumer: string;
  processedAt: Date;
  /** sha256 of the payload, hex; null when the consumer stores none (`payloadHash: false`). */
  payloadHash: string | null;
}

/**
 * What can be said about a claim in progress. A claim is an INSERT in a transaction
 * that has not committed yet, and an uncommitted row is invisible to every other
 * session: no read can see it. Two honest answers exist:
 * - `no-writers`: no other transaction holds a write lock on the table, so none can be
 *   holding an uncommitted claim (read-only, from `pg_locks`).
 * - `probe`: attempting the claim (below) waits on the holder exactly as a redelivery
 *   would.
 */
export type InFlight =
  | { state: 'no'; how: 'no-writers' | 'probe' }
  | { state: 'yes'; how: 'probe' }
  | { state: 'unknown'; how: 'writers'; writers: number }
  | { state: 'unknown'; how: 'table-locked' };

/** The committed claims of `key`: of `consumer`, or of every consumer (one primary-key probe each). */
export async function committedClaims(
  db: Pick<Pool, 'query'>,
  ref: TableRef,
  key: string,
  consumers: readonly string[],
): Promise<CommittedClaim[]> {
  const result = await db
    .query<{ consumer: string; processed_at: Date; payload_hash: string | null }>(
      `SELECT consumer, processed_at, encode(payload_hash, 'hex') AS payload_hash
         FROM ${qualifiedTable(ref)}
        WHERE consumer = ANY($1::text[]) AND message_key = $2
        ORDER BY consumer`,
      [consumers, key],
    )
    .catch((cause: unknown) => {
      throw new DatabaseError('inspect', cause);
    });
  return result.rows.map((r) => ({
    consumer: r.consumer,
    processedAt: r.processed_at,
    payloadHash: r.payload_hash,
  }));
}

/**
 * A key's committed row in the HTTP key table: what was answered to it, and when. The
 * body's bytes are read only when asked for (`withBody`); its size always is.
 */
export interface StoredAnswer {
  createdAt: Date;
  method: string;
  route: string;
  /** sha256 of the request (method, route, query, body), hex. */
  fingerprint: string;
  /** Null when the transaction committed without its response (see docs/cli.md). */
  status: number | null;
  /** The stored (allowlisted) response headers. */
  headers: Record<string, string> | null;
  /** Size of the stored body; null when none was stored. */
  bodyBytes: number | null;
  /** Why no body was stored: larger than `maxBodyBytes`, or streamed. */
  bodyOmitted: BodyOmitted | null;
  /** The stored body, with `withBody` only. */
  body?: Buffer | null;
}

/** The committed row of `key` in `scope` (one primary-key probe), or null. */
export async function storedAnswer(
  db: Pick<Pool, 'query'>,
  ref: TableRef,
  scope: string,
  key: string,
  withBody: boolean,
): Promise<StoredAnswer | null> {
  const result = await db
    .query<{
      created_at: Date;
      method: string;
      route: string;
      fingerprint: string;
      status: number | null;
      headers: Record<string, string> | null;
      body_bytes: number | null;
      body_omitted: BodyOmitted | null;
      body?: Buffer | null;
    }>(
      `SELECT created_at, method, route, encode(fingerprint, 'hex') AS fingerprint, status,
              headers, octet_length(body) AS body_bytes, body_omitted${withBody ? ', body' : ''}
         FROM ${qualifiedTable(ref)}
        WHERE scope = $1 AND idempotency_key = $2`,
      [scope, key],
    )
    .catch((cause: unknown) => {
      throw new DatabaseError('inspect', cause);
    });
  const row = result.rows[0];
  if (row === undefined) return null;
  return {
    createdAt: row.created_at,
    method: row.method,
    route: row.route,
    fingerprint: row.fingerprint,
    status: row.status,
    headers: row.headers,
    bodyBytes: row.body_bytes,
    bodyOmitted: row.body_omitted,
    ...(withBody ? { body: row.body ?? null } : {}),
  };
}

/**
 * Other transactions holding a write lock (RowExclusiveLock, taken by every INSERT and
 * kept until the transaction ends) on the table, prepared transactions included. Zero
 * means no uncommitted claim of any key exists right now; more says nothing about one
 * key (they may be claiming other keys, or pruning).
 */
export async function openWriters(db: Pick<Pool, 'query'>, ref: TableRef): Promise<number> {
  const result = await db
    .query<{ n: string }>(
      `SELECT count(DISTINCT virtualtransaction) AS n FROM pg_locks
        WHERE locktype = 'relation' AND relation = $1::regclass AND granted
          AND mode = 'RowExclusiveLock' AND pid IS DISTINCT FROM pg_backend_pid()`,
      [qualifiedTable(ref)],
    )
    .catch((cause: unknown) => {
      throw new DatabaseError('inspect (pg_locks)', cause);
    });
  return Number(result.rows[0]?.n ?? 0);
}

/**
 * Attempts a claim, inserting `row` (column → value: the group, the key, and whatever
 * else the table requires) in a transaction that always rolls back, waiting at most
 * `waitMs` for a holder, as a redelivery's or a retry's claim would:
 * - the INSERT waits and times out (55P03): another transaction holds an uncommitted
 *   claim of the key (or an uncommitted delete of it, by a prune);
 * - it inserts: nobody holds the key (the row is rolled back at once);
 * - it inserts nothing: a claim was committed meanwhile.
 * It writes: it needs INSERT privilege, and a worker claiming the key in the same
 * instant waits for its ROLLBACK (one round trip). The table lock is taken first with
 * NOWAIT, so a waiting DDL is not mistaken for a claim.
 */
export async function probeClaim(
  pool: Pool,
  ref: TableRef,
  row: Readonly<Record<string, unknown>>,
  waitMs: number,
): Promise<InFlight | 'committed'> {
  const table = qualifiedTable(ref);
  const columns = Object.keys(row);
  const client = await pool.connect().then(guardClient, (cause: unknown) => {
    throw new DatabaseError('connect (inspect --probe)', cause);
  });
  try {
    await client.query('BEGIN');
    try {
      await client.query(`LOCK TABLE ${table} IN ROW EXCLUSIVE MODE NOWAIT`);
    } catch (error) {
      if (sqlstateOf(error) === LOCK_NOT_AVAILABLE)
        return { state: 'unknown', how: 'table-locked' };
      throw error;
    }
    await client.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.round(waitMs))}`);
    try {
      const inserted = await client.query(
        `INSERT INTO ${table} (${columns.map((c) => quoteIdentifier(c)).join(', ')})
         VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')}) ON CONFLICT DO NOTHING`,
        Object.values(row),
      );
      return inserted.rowCount === 1 ? { state: 'no', how: 'probe' } : 'committed';
    } catch (error) {
      if (sqlstateOf(error) === LOCK_NOT_AVAILABLE) return { state: 'yes', how: 'probe' };
      throw error;
    }
  } catch (cause) {
    throw new DatabaseError('inspect --probe', cause);
  } finally {
    const rolledBack = await client.query('ROLLBACK').then(
      () => true,
      () => false,
    );
    client.release(!rolledBack);
  }
}
