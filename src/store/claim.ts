import type { QueryResult } from 'pg';
import type { SqlRunner } from '../data-layer.js';
import { DatabaseError } from '../errors.js';
import type { ClaimSession } from '../tx/claim-transaction.js';
import { qualifiedTable, type TableRef } from './identifiers.js';
import { sqlLiteral } from './literals.js';

/** Isolation level of the claim's transaction; undefined means the database default. */
export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

/** What a claim statement found. */
export interface ClaimResult {
  /** The transaction id that holds the claim (null when nothing was inserted). */
  xid: string | null;
}

// The application may have set lock_timeout on its session: the claim keeps that value
// in a transaction-local placeholder setting and puts it back after the INSERT, so the
// claim's short timeout never applies to the handler's statements and the session's
// own value is what the handler sees.
const SAVED_LOCK_TIMEOUT = 'effectively_once.lock_timeout';

/**
 * The statements before a claim's INSERT: BEGIN (with the isolation level, which must
 * come before any query) and the claim's own `lock_timeout`.
 */
export function claimPrologue(
  lockTimeoutMs: number,
  isolation: IsolationLevel | undefined,
): string {
  const begin =
    isolation === undefined ? 'BEGIN' : `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}`;
  return (
    `${begin}; SELECT set_config('${SAVED_LOCK_TIMEOUT}', current_setting('lock_timeout'), true);` +
    ` SET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))};`
  );
}

/**
 * Runs a claim INSERT (`insert`, one statement ending in `ON CONFLICT DO NOTHING`,
 * without RETURNING) in `session` with the claim's own `lock_timeout`, and returns the
 * rows its RETURNING `returning` gave and the transaction id:
 * - on the library's pg client, one simple-protocol round trip: BEGIN (with
 *   `isolation`), the saved and the claim's lock_timeout, the INSERT, the epilogue;
 * - in a data layer's transaction (found open, its isolation level already set), the
 *   same as single statements, the transaction id read by the INSERT's RETURNING.
 * `maxInserted`: more rows than that is an odd answer, which fails closed.
 */
export async function runClaim<R extends object>(
  session: ClaimSession,
  insert: string,
  returning: string | undefined,
  maxInserted: number,
  lockTimeoutMs: number,
  isolation: IsolationLevel | undefined,
): Promise<{ rows: R[]; inserted: number; xid: string | null }> {
  if (session.pg !== undefined && session.begins) {
    const sql =
      claimPrologue(lockTimeoutMs, isolation) +
      ` ${insert}${returning === undefined ? '' : ` RETURNING ${returning}`};` +
      CLAIM_EPILOGUE;
    const { insert: result, xid } = claimResults<R>(await session.pg.query(sql), maxInserted);
    return { rows: result.rows, inserted: result.rowCount ?? 0, xid };
  }
  return claimInSingleStatements<R>(
    session.sql,
    session.begins ? isolation : undefined,
    session.begins,
    insert,
    returning,
    maxInserted,
    lockTimeoutMs,
  );
}

/**
 * The claim as one statement per call (a data layer runs nothing else). The INSERT's
 * RETURNING carries the transaction id, so a row inserted proves which transaction
 * holds it; the rows are counted, not the layer's rowCount (some layers report none).
 */
async function claimInSingleStatements<R extends object>(
  sql: SqlRunner,
  isolation: IsolationLevel | undefined,
  begins: boolean,
  insert: string,
  returning: string | undefined,
  maxInserted: number,
  lockTimeoutMs: number,
): Promise<{ rows: R[]; inserted: number; xid: string | null }> {
  if (begins)
    await sql.query(
      isolation === undefined ? 'BEGIN' : `BEGIN ISOLATION LEVEL ${isolation.toUpperCase()}`,
    );
  await sql.query(
    `SELECT set_config('${SAVED_LOCK_TIMEOUT}', current_setting('lock_timeout'), true)`,
  );
  await sql.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))}`);
  const result = await sql.query<R & { effectively_once_xid?: unknown }>(
    `${insert} RETURNING ${returning === undefined ? '' : `${returning}, `}` +
      'pg_current_xact_id()::text AS effectively_once_xid',
  );
  await sql.query(
    `SELECT set_config('lock_timeout', current_setting('${SAVED_LOCK_TIMEOUT}'), true)`,
  );
  const rows = Array.isArray(result?.rows) ? result.rows : undefined;
  const xids = new Set(rows?.map((r) => r.effectively_once_xid));
  const xid = rows !== undefined && rows.length > 0 ? [...xids][0] : null;
  if (
    rows === undefined ||
    rows.length > maxInserted ||
    xids.size > 1 ||
    (xid !== null && (typeof xid !== 'string' || !/^\d+$/.test(xid)))
  ) {
    throw new DatabaseError(
      'claim',
      new Error('unexpected answer to the claim statement; nothing is acked on it'),
    );
  }
  return { rows, inserted: rows.length, xid };
}

/**
 * The expiry a claim writes on its row (`expires_at`): `now()` plus the consumer's
 * retention, or `infinity` without one (never pruned but by a prune with a window).
 * Capped at a thousand years, so it stays a valid timestamp.
 */
export function expirySql(keepMs: number | undefined): string {
  if (keepMs === undefined) return "'infinity'";
  const ms = Math.min(Math.max(0, Math.floor(keepMs)), 1000 * 365.25 * 86_400_000);
  return `now() + ${ms} * interval '1 millisecond'`;
}

/** The statement after a claim's INSERT: restores lock_timeout and reads the transaction id. */
export const CLAIM_EPILOGUE =
  ` SELECT set_config('lock_timeout', current_setting('${SAVED_LOCK_TIMEOUT}'), true),` +
  ` pg_current_xact_id_if_assigned()::text AS xid;`;

/**
 * The INSERT's result and the transaction id out of a claim round trip (BEGIN, SELECT,
 * SET, INSERT, SELECT, then `trailing` statements of the caller's, whose results come
 * back in `rest`). Anything else fails CLOSED: reading an odd answer as "no row
 * inserted" would ack a message whose effect never ran.
 */
export function claimResults<R extends object>(
  results: unknown,
  maxInserted: number,
  trailing = 0,
): { insert: QueryResult<R>; xid: string | null; rest: QueryResult[] } {
  const list = results as Array<QueryResult<R> & { rows: unknown[] }>;
  const insert = Array.isArray(list) && list.length === 5 + trailing ? list[3] : undefined;
  const tail = Array.isArray(list) ? list[4]?.rows?.[0] : undefined;
  const xid = (tail as { xid?: unknown } | undefined)?.xid;
  const inserted = insert?.rowCount;
  if (
    insert === undefined ||
    insert.command !== 'INSERT' ||
    typeof inserted !== 'number' ||
    !Number.isInteger(inserted) ||
    inserted < 0 ||
    inserted > maxInserted ||
    (xid !== null && typeof xid !== 'string') ||
    (inserted > 0 && xid === null)
  ) {
    throw new DatabaseError(
      'claim',
      new Error(
        `unexpected answer to the claim statement (${Array.isArray(list) ? list.map((r) => r?.command).join(', ') : typeof list}); nothing is acked on it`,
      ),
    );
  }
  return { insert, xid, rest: list.slice(5) };
}

/**
 * Builds the claim statements for one dedup table. The claim is sent as one
 * simple-protocol round trip (BEGIN, the lock timeout, the INSERT, the reset and the
 * transaction id) because round trips dominate the cost of a message; the values are
 * escaped with pg's literal rules (see sqlLiteral), the names are quoted.
 */
export class ClaimStatements {
  private readonly table: string;
  private readonly expires: string;

  /** `keepMs`: the consumer's retention, written on each claimed row as its expiry. */
  constructor(
    ref: TableRef,
    private readonly isolation: IsolationLevel | undefined,
    keepMs?: number,
  ) {
    this.table = qualifiedTable(ref);
    this.expires = expirySql(keepMs);
  }

  /**
   * Opens the transaction and claims `(consumer, key)`. The INSERT blocks while another
   * open transaction holds the same key and raises 55P03 after `lockTimeoutMs`.
   * `xid` is set when this delivery owns the key, null when it was processed before.
   */
  async begin(
    session: ClaimSession,
    consumer: string,
    key: string,
    hash: Buffer | null,
    lockTimeoutMs: number,
  ): Promise<ClaimResult> {
    // decode(hex): a '\x..' bytea literal is misread when standard_conforming_strings is off.
    const hashSql = hash === null ? 'NULL' : `decode('${hash.toString('hex')}', 'hex')`;
    const insert =
      `INSERT INTO ${this.table} (consumer, message_key, payload_hash, expires_at)` +
      ` VALUES (${sqlLiteral(consumer)}, ${sqlLiteral(key)}, ${hashSql}, ${this.expires}) ON CONFLICT DO NOTHING`;
    // On pg, the INSERT's command tag says whether a row went in: no RETURNING row to parse.
    const { inserted, xid } = await runClaim(
      session,
      insert,
      undefined,
      1,
      lockTimeoutMs,
      this.isolation,
    );
    return { xid: inserted === 1 ? xid : null };
  }

  /**
   * Reads the stored hash of a key already processed (on `client`, in the claim's
   * transaction). The caller ends the (empty) transaction.
   */
  async storedHash(client: SqlRunner, consumer: string, key: string): Promise<Buffer | null> {
    const result = await client.query<{ payload_hash: unknown }>(
      `SELECT ${STORED_HASH_HEX} FROM ${this.table} WHERE consumer = $1 AND message_key = $2`,
      [consumer, key],
    );
    return storedHashOf(result.rows[0]?.payload_hash ?? null);
  }
}

/**
 * The stored payload hash as text, `payload_hash` in hex: a data layer decodes bytea its
 * own way (Prisma gives a plain Uint8Array, not a Buffer), and text reads the same on all.
 */
export const STORED_HASH_HEX = "encode(payload_hash, 'hex') AS payload_hash";

/**
 * A stored hash read as {@link STORED_HASH_HEX}: null when none was stored. Anything but
 * hex fails closed: a misread hash could call a different payload a duplicate.
 */
export function storedHashOf(hex: unknown): Buffer | null {
  if (hex === null) return null;
  if (typeof hex !== 'string' || !/^(?:[0-9a-f]{2})*$/.test(hex))
    throw new DatabaseError(
      'read of the stored payload hash',
      new Error(`unexpected answer (${typeof hex}); expected hex text`),
    );
  return Buffer.from(hex, 'hex');
}
