import type { Pool } from 'pg';
import { ConfigurationError, DatabaseError } from '../errors.js';
import { fractionOption, intOption } from '../option-checks.js';
import { sleep } from '../sleep.js';
import { acquireClient } from '../tx/acquire.js';
import { qualifiedTable, quoteIdentifier, tableRef, type TableRef } from './identifiers.js';
import { EXPIRES_COLUMN, EXPIRY_INDEXED } from './migrate.js';

/** Options of {@link prune}. */
export interface PruneOptions {
  /** Only prune this consumer's keys. Default: every consumer. */
  consumer?: string;
  /**
   * Only keys processed before this instant, or more than this many ms ago (database
   * clock), and then also those that never expire (a consumer without `retention`) or
   * whose lifetime is unknown (processed before expiries were written): for those, give
   * at least the longest `retention` that ever wrote to the table. Without it, the keys
   * whose own expiry (the `retention` of the consumer that processed them) passed, and
   * never one of unknown lifetime. Either way a key is never deleted before its own
   * expiry.
   */
  olderThan?: Date | number;
  /** Rows deleted per statement, so pruning never holds long locks. Default 1000. */
  batchSize?: number;
  /** Schema of the dedup table. Default `public`. */
  schema?: string;
  /** Dedup table name. Default `processed_messages`. */
  table?: string;
  /**
   * Stop early (between batches) when aborted; with it, each statement waits at most
   * 60 s for a pool connection, and the wait ends when aborted.
   */
  signal?: AbortSignal;
  /**
   * Largest share of the time spent deleting, above 0 and at most 1 (default 1: batches
   * back to back). Below 1, after each batch it waits `elapsed × (1 / dutyCycle − 1)`,
   * so a backlog of millions of rows is worked off beside the claims, not ahead of them.
   */
  dutyCycle?: number;
}

/**
 * Deletes dedup rows in bounded batches and returns how many were deleted: those whose
 * own expiry passed and, with `olderThan`, only those older than it (then also those
 * without an expiry, which only a window removes: rows that never expire, and rows of
 * unknown lifetime). A row is never deleted before its own expiry, so
 * consumers and deployments sharing the table never shorten each other's window. The window must
 * outlast the longest redelivery path (visibility timeout × max receives, DLQ redrive,
 * Kafka replays): a key pruned too early lets a late redelivery apply its effect again.
 */
export async function prune(pool: Pool, options: PruneOptions): Promise<number> {
  return pruneTable(pool, dedupPruneTarget(tableRef(options), options.consumer), options);
}

/** Which rows of which table of the family a prune deletes. */
export interface PruneTarget {
  ref: TableRef;
  /** The primary key's columns. */
  keyColumns: readonly string[];
  /** The timestamp the window is measured from. */
  timeColumn: string;
  /**
   * The column of each row's own expiry, where the table has one (see
   * `keyTableStatements`): a row is never deleted before it. `infinity` (its writer set
   * no lifetime) and NULL (not written by a claim: lifetime unknown) go only by a prune
   * with a window. A pruner cannot know the retention such a row was meant to keep, so
   * only the operator, who knows it, chooses that window.
   */
  expiresColumn?: string;
  /** Only rows whose `column` equals `value` (one consumer's, one scope's). */
  only?: { column: string; value: string };
}

/** The options every prune shares; without `olderThan`, the rows whose own expiry passed. */
export type PruneBounds = Partial<Pick<PruneOptions, 'olderThan'>> &
  Pick<PruneOptions, 'batchSize' | 'signal' | 'dutyCycle'>;

/** Largest `batchSize` of a prune. */
export const MAX_PRUNE_BATCH = 100_000;

/**
 * The rows of a key table (see `keyTableStatements`: its own `expires_at`) keyed by
 * (group, key) and aged by `timeColumn`: every group's, or the one `group` names.
 */
export function keyedPruneTarget(
  ref: TableRef,
  columns: { group: string; key: string; time: string },
  group: string | undefined,
): PruneTarget {
  return {
    ref,
    keyColumns: [columns.group, columns.key],
    timeColumn: columns.time,
    expiresColumn: EXPIRES_COLUMN,
    ...(group !== undefined ? { only: { column: columns.group, value: group } } : {}),
  };
}

/** The dedup table's rows, all consumers' or one's. */
export function dedupPruneTarget(ref: TableRef, consumer: string | undefined): PruneTarget {
  return keyedPruneTarget(
    ref,
    { group: 'consumer', key: 'message_key', time: 'processed_at' },
    consumer,
  );
}

/**
 * When a prune runs, on the database's clock: `now`, which a row's own expiry is held
 * against, and `cutoff` (now minus the window), undefined for a prune by expiry alone.
 */
export interface PruneClock {
  now: Date;
  cutoff: Date | undefined;
}

/**
 * Deletes the target's prunable rows (see {@link PruneTarget}) in bounded batches, SKIP
 * LOCKED, busy at most `dutyCycle` of the time, on the database's clock.
 */
export async function pruneTable(
  pool: Pool,
  target: PruneTarget,
  options: PruneBounds,
): Promise<number> {
  const batchSize = intOption('batchSize', options.batchSize, 1000, 1, MAX_PRUNE_BATCH);
  const duty = fractionOption('dutyCycle', options.dutyCycle, 1);
  if (options.olderThan === undefined && target.expiresColumn === undefined)
    throw new ConfigurationError('olderThan', 'is required: these rows carry no expiry');
  const table = qualifiedTable(target.ref);
  const keys = target.keyColumns.map((c) => quoteIdentifier(c)).join(', ');
  const db = prunePool(pool, options.signal);
  let clock: PruneClock;
  try {
    clock = await pruneClock(db, options.olderThan);
  } catch (error) {
    if (options.signal?.aborted) return 0;
    throw error;
  }
  let total = 0;
  // One pass per condition, each on its own index (see prunable).
  for (const { where, params } of prunable(target, clock)) {
    // SKIP LOCKED: never wait behind a worker that is touching the same rows.
    const sql = `
    DELETE FROM ${table} t
     WHERE (${target.keyColumns.map((c) => `t.${quoteIdentifier(c)}`).join(', ')}) IN (
       SELECT ${keys} FROM ${table}
        WHERE ${where}
        LIMIT $${params.length + 1}
        FOR UPDATE SKIP LOCKED)`;
    for (;;) {
      if (options.signal?.aborted) return total;
      const started = performance.now();
      const result = await db.query(sql, [...params, batchSize]).catch((cause: unknown) => {
        // Stopped while waiting for a connection: what was deleted so far stands.
        if (options.signal?.aborted) return undefined;
        throw new DatabaseError('prune', cause);
      });
      if (result === undefined) return total;
      const deleted = result.rowCount ?? 0;
      total += deleted;
      if (deleted < batchSize) break;
      if (duty < 1) await sleep((performance.now() - started) * (1 / duty - 1), options.signal);
    }
  }
  return total;
}

/** How long a prune waits for a pool connection before this run gives up (the next tries). */
const PRUNE_ACQUIRE_MS = 60_000;

/**
 * The pool a prune's statements go through. With a signal (a background pruner's, or a
 * caller's), each takes its connection by a bounded acquire that the signal aborts: pg
 * otherwise queues a query for a client without bound, and a pool saturated by requests
 * in flight would hold the pruner's stop(), and a close() behind it, for ever.
 */
function prunePool(pool: Pool, signal: AbortSignal | undefined): Pick<Pool, 'query'> {
  if (signal === undefined) return pool;
  const query = async (sql: string, params: unknown[]) => {
    const client = await acquireClient(pool, PRUNE_ACQUIRE_MS, signal);
    try {
      return await client.query(sql, params);
    } finally {
      client.release();
    }
  };
  return { query } as unknown as Pick<Pool, 'query'>;
}

/**
 * The rows a prune deletes, as conditions each pass deletes by: one owner for the
 * DELETE and for counting them. Without an expiry column: older than the window. With
 * one, a row goes only once its own expiry has passed; with a window, only rows older
 * than it as well, and then also those without a lifetime (`infinity`) or of unknown
 * lifetime (NULL). Without a window, never a row of unknown lifetime: its writer's
 * retention is not known, and a guess shorter than it frees a key still promised.
 */
function prunable(
  target: PruneTarget,
  clock: PruneClock,
): Array<{ where: string; params: unknown[] }> {
  const time = quoteIdentifier(target.timeColumn);
  const expires =
    target.expiresColumn === undefined ? undefined : quoteIdentifier(target.expiresColumn);
  const condition = (build: (param: (value: unknown) => string) => string) => {
    const params: unknown[] = [];
    const param = (value: unknown): string => `$${params.push(value)}`;
    let where = build(param);
    if (target.only !== undefined)
      where += ` AND ${quoteIdentifier(target.only.column)} = ${param(target.only.value)}`;
    return { where, params };
  };
  const { cutoff, now } = clock;
  if (cutoff !== undefined)
    return [
      condition((p) =>
        expires === undefined
          ? `${time} < ${p(cutoff)}`
          : `${time} < ${p(cutoff)} AND (${expires} IS NULL OR ${expires} < ${p(now)} OR ${expires} = 'infinity')`,
      ),
    ];
  if (expires === undefined) return [];
  // Repeats the expiry index's predicate, so the planner can use it whatever the
  // parameters (see EXPIRY_INDEXED). `expires < now` is never true of NULL.
  const indexed = expires === quoteIdentifier(EXPIRES_COLUMN);
  const expiring = indexed ? ` AND ${EXPIRY_INDEXED.expiring}` : '';
  return [condition((p) => `${expires} < ${p(now)}${expiring}`)];
}

/**
 * How many rows a prune of `target` would delete at `clock` (what a dry run reports).
 * Counts through the time or expiry index: reads every prunable entry, so it takes
 * about as long as the backlog is large, but it deletes and locks nothing.
 */
export async function countPrunable(
  pool: Pick<Pool, 'query'>,
  target: PruneTarget,
  clock: PruneClock,
): Promise<number> {
  let total = 0;
  for (const { where, params } of prunable(target, clock)) {
    const result = await pool
      .query<{
        n: string;
      }>(`SELECT count(*) AS n FROM ${qualifiedTable(target.ref)} WHERE ${where}`, params)
      .catch((cause: unknown) => {
        throw new DatabaseError('count prunable rows', cause);
      });
    total += Number(result.rows[0]?.n ?? 0);
  }
  return total;
}

const THOUSAND_YEARS_MS = 1000 * 365.25 * 86_400_000;

function checkOlderThan(olderThan: Date | number): void {
  if (olderThan instanceof Date) {
    if (Number.isNaN(olderThan.getTime()))
      throw new ConfigurationError('olderThan', 'is an invalid Date');
    return;
  }
  if (typeof olderThan !== 'number' || !Number.isFinite(olderThan) || olderThan < 0) {
    throw new ConfigurationError('olderThan', 'must be a Date or a non-negative number of ms', {
      olderThan,
    });
  }
}

/**
 * The clock of a prune: the database's `now()` and, with a window, its cutoff (see
 * {@link pruneCutoff}).
 */
export async function pruneClock(
  pool: Pick<Pool, 'query'>,
  olderThan: Date | number | undefined,
): Promise<PruneClock> {
  if (olderThan !== undefined) checkOlderThan(olderThan);
  const result = await pool
    .query<{ now: Date; cutoff: Date }>(
      `SELECT now() AS now, now() - $1::double precision * interval '1 millisecond' AS cutoff`,
      [typeof olderThan === 'number' ? Math.min(olderThan, THOUSAND_YEARS_MS) : 0],
    )
    .catch((cause: unknown) => {
      throw new DatabaseError('prune', cause);
    });
  const row = result.rows[0];
  if (!(row?.now instanceof Date) || !(row.cutoff instanceof Date))
    throw new DatabaseError('prune', new Error('no cutoff from now()'));
  const cutoff =
    olderThan === undefined ? undefined : olderThan instanceof Date ? olderThan : row.cutoff;
  return { now: row.now, cutoff };
}

/**
 * A window in ms is measured on the database's clock, the one that wrote the rows'
 * timestamps: a worker whose clock runs ahead would otherwise prune keys younger than
 * the window (and let their late redeliveries apply again). A `Date` is used as given.
 */
export async function pruneCutoff(
  pool: Pick<Pool, 'query'>,
  olderThan: Date | number,
): Promise<Date> {
  checkOlderThan(olderThan);
  if (olderThan instanceof Date) return olderThan;
  const result = await pool
    .query<{ cutoff: Date }>(
      `SELECT now() - $1::double precision * interval '1 millisecond' AS cutoff`,
      // A window beyond a thousand years prunes nothing; capped so the date stays in range.
      [Math.min(olderThan, THOUSAND_YEARS_MS)],
    )
    .catch((cause: unknown) => {
      throw new DatabaseError('prune', cause);
    });
  const cutoff = result.rows[0]?.cutoff;
  if (!(cutoff instanceof Date))
    throw new DatabaseError('prune', new Error('no cutoff from now()'));
  return cutoff;
}
