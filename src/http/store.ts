import type { Pool, PoolClient, QueryResult } from 'pg';
import type { SqlRunner } from '../data-layer.js';
import type { BoundStatement } from '../tx/claim-transaction.js';
import { DatabaseError } from '../errors.js';
import type { IsolationLevel } from '../store/claim.js';
import { qualifiedDerived, qualifiedTable, tableRef, type TableRef } from '../store/identifiers.js';
import { sqlLiteral } from '../store/literals.js';
import { keyTableStatements } from '../store/migrate.js';
import { applyMigrations } from '../store/migrator.js';
import type { TableFamily } from '../store/table-family.js';
import { keyedPruneTarget, pruneTable, type PruneTarget } from '../store/prune.js';
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

/**
 * Where the claim runs: `sql`, one statement per call inside the claim's transaction;
 * `pg`, the library's own client when it may take several in one round trip; `begins`,
 * whether the claim opens the transaction (the driver's ClaimSession).
 */
export interface ClaimStatementSession {
  readonly sql: SqlRunner;
  readonly pg: PoolClient | undefined;
  readonly begins: boolean;
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
  expires_at      timestamptz,
  PRIMARY KEY (scope, idempotency_key)`;

// The claim and the stored response are PL/pgSQL functions beside the table, not
// statements sent as text: their plans are cached per session, where five statements
// parsed and planned on every request made the database do twice the seed handler's
// work per request (`npm run bench -- --http-sql`). `_v1`: a later version that changes
// them creates its own beside these in a migration step, so instances of both versions
// can run at once during a rolling deploy.
const CLAIM_SUFFIX = '_claim_v1';
const STORE_SUFFIX = '_store_v1';

/** The two functions of a key table, qualified and quoted. */
function functionNames(ref: TableRef): { claim: string; store: string } {
  return { claim: qualifiedDerived(ref, CLAIM_SUFFIX), store: qualifiedDerived(ref, STORE_SUFFIX) };
}

/**
 * The key table's version 1: the table, its pruning indexes, and the two functions.
 * - `expires_at`: the row's own expiry, `now()` plus the retention of the configuration
 *   that claimed it, `infinity` when that one has none (`retention: false`), NULL when
 *   its lifetime is unknown (a row the claim did not write). Pruners delete a row only
 *   once its own expiry has passed, so no configuration sharing the table shortens
 *   another's key lifetime (see `PruneTarget`).
 * - claim: inserts the key row under the request's `lock_timeout` (then puts the
 *   session's back); one row back: the transaction id when it inserted, else the stored
 *   row (read by a statement of its own, so in READ COMMITTED it sees a row the other
 *   transaction committed while this one waited), else all NULL (pruned meanwhile).
 * - store: completes the claimed row with the response; raises when the row is gone,
 *   so the COMMIT after it never commits an effect without its response.
 */
function keyTableVersion1(ref: TableRef): string[] {
  const table = qualifiedTable(ref);
  const fn = functionNames(ref);
  const none =
    'NULL::text, NULL::text, NULL::bytea, NULL::smallint, NULL::jsonb, NULL::bytea, NULL::text';
  return [
    ...keyTableStatements({ ref, columns: COLUMNS, timeColumn: 'created_at' }),
    `CREATE OR REPLACE FUNCTION ${fn.claim}(p_scope text, p_key text, p_method text, p_route text, p_fingerprint bytea, p_lock_timeout text, p_keep_ms double precision)
RETURNS TABLE (xid text, method text, route text, fingerprint bytea, status smallint, headers jsonb, body bytea, body_omitted text)
LANGUAGE plpgsql VOLATILE AS ${dollarQuoted(`
#variable_conflict use_column
DECLARE
  saved text := current_setting('lock_timeout');
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout, true);
  INSERT INTO ${table} (scope, idempotency_key, method, route, fingerprint, expires_at)
    VALUES (p_scope, p_key, p_method, p_route, p_fingerprint,
            coalesce(now() + p_keep_ms * interval '1 millisecond', 'infinity'))
    ON CONFLICT DO NOTHING;
  IF FOUND THEN
    PERFORM set_config('lock_timeout', saved, true);
    RETURN QUERY SELECT pg_current_xact_id_if_assigned()::text, ${none};
    RETURN;
  END IF;
  PERFORM set_config('lock_timeout', saved, true);
  RETURN QUERY SELECT NULL::text, k.method, k.route, k.fingerprint, k.status, k.headers, k.body, k.body_omitted
    FROM ${table} AS k WHERE k.scope = p_scope AND k.idempotency_key = p_key;
  IF NOT FOUND THEN
    RETURN QUERY SELECT NULL::text, ${none};
  END IF;
END
`)}`,
    `CREATE OR REPLACE FUNCTION ${fn.store}(p_scope text, p_key text, p_status smallint, p_headers jsonb, p_body bytea, p_body_omitted text)
RETURNS void
LANGUAGE plpgsql VOLATILE AS ${dollarQuoted(`
BEGIN
  UPDATE ${table} SET status = p_status, headers = p_headers, body = p_body, body_omitted = p_body_omitted
    WHERE scope = p_scope AND idempotency_key = p_key;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'effectively-once: the row of key % (scope %) is gone', p_key, p_scope
      USING ERRCODE = 'no_data_found';
  END IF;
END
`)}`,
  ];
}

/**
 * A function body between dollar quotes whose tag it does not contain: the table's
 * name is in the body, and a name holding `$eo$` must not end the quoting.
 */
function dollarQuoted(body: string): string {
  let tag = '$eo$';
  while (body.includes(tag)) tag = `${tag.slice(0, -1)}_$`;
  return `${tag}${body}${tag}`;
}

/** The HTTP idempotency keys' table (`eo_idempotency_keys`) and its functions, as a {@link TableFamily}. */
export const idempotencyKeyTables: TableFamily = {
  name: 'http-keys',
  summary: 'the HTTP Idempotency-Key table (one row per key, with its stored response)',
  defaultTable: DEFAULT_TABLE,
  steps: (ref) => [
    {
      version: 1,
      summary: 'the key table, its created_at and expiry indexes, its claim and store functions',
      statements: keyTableVersion1(ref),
    },
  ],
};

/**
 * Brings the key table (default `public.eo_idempotency_keys`) up to this version,
 * recording each step in the schema's `effectively_once_migrations` ledger: the same
 * rules as the consumer's dedup table (`migrate`), so an instance starting beside a busy
 * fleet only reads the ledger.
 */
export async function migrateKeyTable(
  pool: Pool,
  options: { schema?: string; table?: string } = {},
): Promise<void> {
  await applyMigrations(
    pool,
    idempotencyKeyTables,
    tableRef({ schema: options.schema, table: options.table ?? DEFAULT_TABLE }),
  );
}

/** Options of {@link pruneIdempotencyKeys}. */
export interface PruneKeysOptions {
  /**
   * Only keys created before this instant, or more than this many ms ago (database
   * clock), and then also those that never expire (claimed under `retention: false`) or
   * whose lifetime is unknown (claimed before expiries were written): for those, give at
   * least the longest `retention` that ever wrote to the table. Without it, the keys
   * whose own expiry has passed, and never one of unknown lifetime. Either way a key is
   * never deleted before its own expiry.
   */
  olderThan?: Date | number;
  /** Rows deleted per statement. Default 1000. */
  batchSize?: number;
  /**
   * Stop early (between batches) when aborted; with it, each statement waits at most
   * 60 s for a pool connection, and the wait ends when aborted.
   */
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

/** The key table's rows a prune deletes, every scope's or one's (the CLI's too). */
export function keyPruneTarget(ref: TableRef, scope: string | undefined): PruneTarget {
  return keyedPruneTarget(
    ref,
    { group: 'scope', key: 'idempotency_key', time: 'created_at' },
    scope,
  );
}

/**
 * Deletes stored keys in bounded SKIP LOCKED batches and returns how many went: those
 * whose own expiry has passed (written at the claim from the claiming configuration's
 * `retention`) and, with `olderThan`, only those older than it, and then also those
 * that never expire or whose lifetime is unknown (claimed before expiries were
 * written: only a window removes those, since no pruner can know the retention they
 * were claimed under). A key is never deleted before its own expiry, so configurations
 * and services sharing the table never shorten each other's key lifetime. A pruned key
 * is free again: a retry that comes later runs afresh, so the lifetime must outlast
 * your clients' retries (idempotentFetch's `deadlineMs`).
 */
export function pruneIdempotencyKeys(pool: Pool, options: PruneKeysOptions = {}): Promise<number> {
  return pruneTable(
    pool,
    keyPruneTarget(
      tableRef({ schema: options.schema, table: options.table ?? DEFAULT_TABLE }),
      options.scope,
    ),
    options,
  );
}

/**
 * The key table's statements. They go out as simple-protocol round trips with escaped
 * literals, calling the table's functions: BEGIN and the claim in one, the stored
 * response and the verified COMMIT in another (commitClaim's).
 */
export class KeyStatements {
  private readonly table: string;
  private readonly fn: { claim: string; store: string };

  /** The claim's lifetime argument: the retention in ms, or NULL (`infinity`: never expires). */
  private readonly keep: string;

  /**
   * `keepMs`: how long a claimed key stays valid (the configuration's retention), written
   * on its row as `expires_at`; undefined, it never expires (`retention: false`).
   */
  constructor(
    ref: TableRef,
    private readonly isolation: IsolationLevel | undefined,
    keepMs?: number,
  ) {
    this.table = qualifiedTable(ref);
    this.fn = functionNames(ref);
    this.keep = keepLiteral(keepMs);
  }

  /**
   * Claims the key. When the claim opens the transaction (`session.begins`, on the
   * library's own pg client), BEGIN and the claim go in one round trip. Inside a
   * transaction already open (a data layer's, see DataLayer) the claim is one statement
   * of its own with `$1…` parameters, whose columns come back as text (each layer
   * decodes bytea, jsonb and smallint its own way). The INSERT blocks while another open
   * transaction holds the key, up to `waitMs` (then 55P03; the claim function sets
   * `lock_timeout` for itself, transaction-locally); once it may go on, a key the other
   * committed is read back in the same statement.
   */
  async claim(
    session: ClaimStatementSession,
    claim: KeyClaim,
    waitMs: number,
  ): Promise<ClaimFound> {
    const row =
      session.begins && session.pg !== undefined
        ? claimRow(await session.pg.query(this.claimSql(claim, waitMs)))
        : layerClaimRow(
            await session.sql.query(this.layerClaimSql(waitMs), layerClaimValues(claim)),
          );
    if (row.xid !== null) return { kind: 'claimed', xid: row.xid };
    if (row.method === null) return { kind: 'vanished' };
    return {
      kind: 'stored',
      record: {
        method: row.method,
        route: row.route ?? '',
        fingerprint: row.fingerprint ?? Buffer.alloc(0),
        status: row.status,
        headers: row.headers,
        body: row.body,
        bodyOmitted: row.body_omitted,
      },
    };
  }

  /**
   * The claim as one statement inside a transaction already open (a data layer's): no
   * BEGIN, parameters `$1…$5` (scope, key, method, route, the fingerprint in hex), every
   * column cast to text so any layer's decoding reads it the same.
   */
  layerClaimSql(waitMs: number): string {
    return (
      `SELECT c.xid, c.method, c.route, encode(c.fingerprint, 'hex') AS fingerprint,` +
      ` c.status::text AS status, c.headers::text AS headers, encode(c.body, 'hex') AS body,` +
      ` c.body_omitted FROM ${this.fn.claim}($1::text, $2::text, $3::text, $4::text,` +
      ` decode($5::text, 'hex'), '${Math.max(1, Math.floor(waitMs))}', ${this.keep}) AS c`
    );
  }

  /** The claim's round trip, as `claim` sends it (the HTTP bench replays it with pgbench). */
  claimSql(claim: KeyClaim, waitMs: number): string {
    const begin =
      this.isolation === undefined
        ? 'BEGIN'
        : `BEGIN ISOLATION LEVEL ${this.isolation.toUpperCase()}`;
    return (
      `${begin}; SELECT * FROM ${this.fn.claim}(${sqlLiteral(claim.scope)}, ${sqlLiteral(claim.key)},` +
      ` ${sqlLiteral(claim.method)}, ${sqlLiteral(claim.route)}, ${bytea(claim.fingerprint)},` +
      ` '${Math.max(1, Math.floor(waitMs))}', ${this.keep});`
    );
  }

  /**
   * Stores the response on the claimed row (run by commitClaim after its check, before
   * COMMIT). Raises if the row is gone, so a response is never "committed" without it.
   * The function returns void, read `::text`: a data layer may not decode void (Prisma's
   * adapter-pg fails the statement on it, after it ran).
   */
  storeResponse(claim: Pick<KeyClaim, 'scope' | 'key'>, response: ResponseRecord): string {
    const body = response.body === null ? 'NULL' : bytea(response.body);
    const omitted = response.bodyOmitted === null ? 'NULL' : sqlLiteral(response.bodyOmitted);
    return (
      `SELECT ${this.fn.store}(${sqlLiteral(claim.scope)}, ${sqlLiteral(claim.key)},` +
      ` ${Math.trunc(response.status)}::smallint, ${sqlLiteral(JSON.stringify(response.headers))}::jsonb,` +
      ` ${body}, ${omitted})::text`
    );
  }

  /**
   * {@link storeResponse} as one statement with `$1…` values, for a data layer: nothing
   * of the answer goes through the layer's text (Knex reads every `?` in it, even in a
   * literal), so it round-trips byte for byte whatever the headers hold.
   */
  storeResponseBound(
    claim: Pick<KeyClaim, 'scope' | 'key'>,
    response: ResponseRecord,
  ): BoundStatement {
    const body = response.body === null ? null : hex(response.body);
    return {
      text:
        `SELECT ${this.fn.store}($1::text, $2::text, $3::text::smallint, $4::text::jsonb,` +
        ` decode($5::text, 'hex'), $6::text)::text`,
      values: [
        claim.scope,
        claim.key,
        String(Math.trunc(response.status)),
        JSON.stringify(response.headers),
        body,
        response.bodyOmitted,
      ],
    };
  }

  /** {@link forget} as one statement with `$1…` values, for a data layer. */
  forgetBound(claim: Pick<KeyClaim, 'scope' | 'key'>): BoundStatement {
    return {
      text: `DELETE FROM ${this.table} WHERE scope = $1::text AND idempotency_key = $2::text`,
      values: [claim.scope, claim.key],
    };
  }

  /** Drops the row of a request that had no key of its own (nothing to replay). */
  forget(claim: Pick<KeyClaim, 'scope' | 'key'>): string {
    return (
      `DELETE FROM ${this.table} WHERE scope = ${sqlLiteral(claim.scope)}` +
      ` AND idempotency_key = ${sqlLiteral(claim.key)}`
    );
  }
}

/**
 * The claim function's one row out of the round trip (BEGIN, then the SELECT).
 * Anything else fails CLOSED: reading an odd answer as "stored" or "claimed" could
 * answer a request whose effect never ran.
 */
function claimRow(results: unknown): ClaimRow {
  const list = results as Array<QueryResult<ClaimRow>>;
  const select = Array.isArray(list) && list.length === 2 ? list[1] : undefined;
  const row = select?.command === 'SELECT' && select.rows.length === 1 ? select.rows[0] : undefined;
  if (
    list?.[0]?.command !== 'BEGIN' ||
    row === undefined ||
    (row.xid !== null && !/^\d+$/.test(String(row.xid))) ||
    (row.xid === null && row.method !== null && !Buffer.isBuffer(row.fingerprint))
  )
    throw new DatabaseError(
      'claim',
      new Error(
        `unexpected answer to the claim (${Array.isArray(list) ? list.map((r) => r?.command).join(', ') : typeof list}); nothing is answered on it`,
      ),
    );
  return row;
}

/** The claim's parameters inside a data layer's transaction, all text (see layerClaimSql). */
function layerClaimValues(claim: KeyClaim): string[] {
  return [claim.scope, claim.key, claim.method, claim.route, claim.fingerprint.toString('hex')];
}

/**
 * The layer claim's one row, its text columns decoded. Anything else fails CLOSED, as
 * {@link claimRow}: an odd answer is never read as "stored" or "claimed".
 */
function layerClaimRow(result: unknown): ClaimRow {
  const rows = (result as { rows?: unknown } | null)?.rows;
  const row = Array.isArray(rows) && rows.length === 1 ? (rows[0] as LayerClaimRow) : undefined;
  const text = (v: unknown): v is string | null => v === null || typeof v === 'string';
  const hex = (v: string | null): Buffer | null =>
    v === null ? null : /^(?:[0-9a-f]{2})*$/.test(v) ? Buffer.from(v, 'hex') : odd();
  const odd = (): never => {
    throw new DatabaseError(
      'claim',
      new Error('unexpected answer to the claim through the data layer; nothing is answered on it'),
    );
  };
  if (
    row === undefined ||
    typeof row !== 'object' ||
    ![row.xid, row.method, row.route, row.fingerprint, row.status, row.headers, row.body].every(
      text,
    ) ||
    !text(row.body_omitted) ||
    (row.xid !== null && !/^\d+$/.test(row.xid)) ||
    (row.xid === null && row.method !== null && row.fingerprint === null) ||
    (row.status !== null && !/^\d+$/.test(row.status))
  )
    return odd();
  return {
    xid: row.xid,
    method: row.method,
    route: row.route,
    fingerprint: hex(row.fingerprint),
    status: row.status === null ? null : Number(row.status),
    headers: row.headers === null ? null : (JSON.parse(row.headers) as Record<string, string>),
    body: hex(row.body),
    body_omitted: row.body_omitted as BodyOmitted | null,
  };
}

/** The layer claim's row as it comes back: every column text. */
interface LayerClaimRow {
  xid: string | null;
  method: string | null;
  route: string | null;
  fingerprint: string | null;
  status: string | null;
  headers: string | null;
  body: string | null;
  body_omitted: string | null;
}

interface ClaimRow {
  xid: string | null;
  method: string | null;
  route: string | null;
  fingerprint: Buffer | null;
  status: number | null;
  headers: Record<string, string> | null;
  body: Buffer | null;
  body_omitted: BodyOmitted | null;
}

/**
 * A lifetime in ms as the claim's argument: NULL for none. Capped at a thousand years,
 * as a prune's window is, so `now() +` it stays a valid timestamp.
 */
function keepLiteral(keepMs: number | undefined): string {
  if (keepMs === undefined) return 'NULL';
  return `${Math.min(Math.max(0, Math.floor(keepMs)), 1000 * 365.25 * 86_400_000)}`;
}

// decode(hex): a '\x..' bytea literal is misread when standard_conforming_strings is off.
function bytea(bytes: Uint8Array): string {
  return `decode('${hex(bytes)}', 'hex')`;
}

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}
