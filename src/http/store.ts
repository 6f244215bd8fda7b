import type { Pool, PoolClient, QueryResult } from 'pg';
import {
  CLAIM_EPILOGUE,
  claimPrologue,
  claimResults,
  type IsolationLevel,
} from '../store/claim.js';
import { qualifiedTable, tableRef, type TableRef } from '../store/identifiers.js';
import { sqlLiteral } from '../store/literals.js';
import { prunedTableFamily } from '../store/migrate.js';
import type { TableFamily } from '../store/table-family.js';
import { pruneTable } from '../store/prune.js';
import { DEFAULT_TABLE } from './options.js';

/** Why a stored response has no body: larger than `maxBodyBytes`, or streamed. */
export type BodyOmitted = 'too-large' | 'stream';

/** A key's row as a later request finds it. */
export interface StoredRecord {
  method: string;
  route: string;
  fingerprint: Buffer;
  /** Null only inside the claiming transaction, which nobody else can see. */
  status: number | null;
  headers: Record<string, string> | null;
  body: Buffer | null;
  bodyOmitted: BodyOmitted | null;
}

/** The response stored with a key, in the claim's transaction. */
export interface ResponseRecord {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array | null;
  bodyOmitted: BodyOmitted | null;
}

/** One claim of `(scope, key)`. */
export interface KeyClaim {
  scope: string;
  key: string;
  method: string;
  route: string;
  fingerprint: Buffer;
}

/** What the claim's round trip found. */
export type ClaimFound =
  | { kind: 'claimed'; xid: string }
  | { kind: 'stored'; record: StoredRecord }
  /** The key's row was gone by the time it was read (pruned): claim again. */
  | { kind: 'vanished' };

const COLUMNS = `  scope           text        NOT NULL,
  idempotency_key text        NOT NULL,
  method          text        NOT NULL,
  route           text        NOT NULL,
  fingerprint     bytea       NOT NULL,
  status          smallint,
  headers         jsonb,
  body            bytea,
  body_omitted    text CHECK (body_omitted IN ('too-large', 'stream')),
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, idempotency_key)`;

/** The HTTP idempotency keys' table (`eo_idempotency_keys`), as a {@link TableFamily}. */
export const idempotencyKeyTables: TableFamily = prunedTableFamily({
  name: 'http-keys',
  summary: 'the HTTP Idempotency-Key table (one row per key, with its stored response)',
  defaultTable: DEFAULT_TABLE,
  columns: COLUMNS,
  timeColumn: 'created_at',
});

// Raised (42704, unrecognized setting) when the response could not be stored because
// the key's row is not there: the COMMIT after it is skipped, everything rolls back.
const ROW_MISSING = 'effectively_once.idempotency_row_missing';

/**
 * Creates the key table (default `public.eo_idempotency_keys`) and its `created_at`
 * index if missing: the same advisory lock and skip-when-present rule as the
 * consumer's dedup table, so an instance starting beside a busy fleet takes no lock.
 */
export async function migrateKeyTable(
  pool: Pool,
  options: { schema?: string; table?: string } = {},
): Promise<void> {
  await idempotencyKeyTables.migrate(
    pool,
    tableRef({ schema: options.schema, table: options.table ?? DEFAULT_TABLE }),
  );
}

/** Options of {@link pruneIdempotencyKeys}. */
export interface PruneKeysOptions {
  /** Delete keys created before this instant, or more than this many ms ago (database clock). */
  olderThan: Date | number;
  /** Rows deleted per statement. Default 1000. */
  batchSize?: number;
  /** Stop early (between batches) when aborted. */
  signal?: AbortSignal;
  /** Largest share of the time spent deleting, (0, 1]. Default 1. */
  dutyCycle?: number;
  /** Schema of the key table. Default `public`. */
  schema?: string;
  /** Name of the key table. Default `eo_idempotency_keys`. */
  table?: string;
  /** Only this scope's keys. Default: every scope. */
  scope?: string;
}

/**
 * Deletes stored keys older than `olderThan` (a Date, or ms on the database's clock)
 * in bounded SKIP LOCKED batches and returns how many went. A pruned key is free
 * again: a retry that comes later runs afresh, so the window must outlast your
 * clients' retries (idempotentFetch's `deadlineMs`).
 */
export function pruneIdempotencyKeys(pool: Pool, options: PruneKeysOptions): Promise<number> {
  return pruneTable(
    pool,
    {
      ref: tableRef({ schema: options.schema, table: options.table ?? DEFAULT_TABLE }),
      keyColumns: ['scope', 'idempotency_key'],
      timeColumn: 'created_at',
      ...(options.scope !== undefined ? { only: { column: 'scope', value: options.scope } } : {}),
    },
    options,
  );
}

/**
 * The key table's statements. Like the consumer's claim, they go out as simple-protocol
 * round trips with escaped literals: the claim (and the stored row, for a retry) in one,
 * the stored response and the COMMIT in another.
 */
export class KeyStatements {
  private readonly table: string;

  constructor(
    ref: TableRef,
    private readonly isolation: IsolationLevel | undefined,
  ) {
    this.table = qualifiedTable(ref);
  }

  /**
   * Opens the transaction and claims the key. The INSERT blocks while another open
   * transaction holds the key, up to `waitMs` (then 55P03); once it may go on, a key
   * the other committed is read back in the same round trip.
   */
  async claim(client: PoolClient, claim: KeyClaim, waitMs: number): Promise<ClaimFound> {
    const where = this.where(claim);
    const sql =
      claimPrologue(waitMs, this.isolation) +
      ` INSERT INTO ${this.table} (scope, idempotency_key, method, route, fingerprint)` +
      ` VALUES (${sqlLiteral(claim.scope)}, ${sqlLiteral(claim.key)}, ${sqlLiteral(claim.method)},` +
      ` ${sqlLiteral(claim.route)}, ${bytea(claim.fingerprint)}) ON CONFLICT DO NOTHING;` +
      CLAIM_EPILOGUE +
      ` SELECT method, route, fingerprint, status, headers, body, body_omitted FROM ${this.table} WHERE ${where};`;
    const { insert, xid, rest } = claimResults(await client.query(sql), 1, 1);
    if (insert.rowCount === 1 && xid !== null) return { kind: 'claimed', xid };
    const row = (rest[0] as QueryResult<RawRow> | undefined)?.rows[0];
    if (row === undefined) return { kind: 'vanished' };
    return {
      kind: 'stored',
      record: {
        method: row.method,
        route: row.route,
        fingerprint: row.fingerprint,
        status: row.status,
        headers: row.headers,
        body: row.body,
        bodyOmitted: row.body_omitted,
      },
    };
  }

  /**
   * Stores the response on the claimed row (run by commitClaim after its check, before
   * COMMIT). Raises if the row is gone, so a response is never "committed" without it.
   */
  storeResponse(claim: Pick<KeyClaim, 'scope' | 'key'>, response: ResponseRecord): string {
    const body = response.body === null ? 'NULL' : bytea(response.body);
    const omitted = response.bodyOmitted === null ? 'NULL' : sqlLiteral(response.bodyOmitted);
    return (
      `WITH stored AS (UPDATE ${this.table} SET status = ${Math.trunc(response.status)},` +
      ` headers = ${sqlLiteral(JSON.stringify(response.headers))}::jsonb, body = ${body},` +
      ` body_omitted = ${omitted} WHERE ${this.where(claim)} RETURNING 1)` +
      ` SELECT CASE WHEN count(*) = 1 THEN '' ELSE current_setting('${ROW_MISSING}') END FROM stored`
    );
  }

  /** Drops the row of a request that had no key of its own (nothing to replay). */
  forget(claim: Pick<KeyClaim, 'scope' | 'key'>): string {
    return `DELETE FROM ${this.table} WHERE ${this.where(claim)}`;
  }

  private where(claim: Pick<KeyClaim, 'scope' | 'key'>): string {
    return `scope = ${sqlLiteral(claim.scope)} AND idempotency_key = ${sqlLiteral(claim.key)}`;
  }
}

interface RawRow {
  method: string;
  route: string;
  fingerprint: Buffer;
  status: number | null;
  headers: Record<string, string> | null;
  body: Buffer | null;
  body_omitted: BodyOmitted | null;
}

// decode(hex): a '\x..' bytea literal is misread when standard_conforming_strings is off.
function bytea(bytes: Uint8Array): string {
  return `decode('${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex')}', 'hex')`;
}
