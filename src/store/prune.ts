import type { Pool } from 'pg';
import { ConfigurationError, DatabaseError } from '../errors.js';
import { fractionOption, intOption } from '../option-checks.js';
import { sleep } from '../sleep.js';
import { qualifiedTable, quoteIdentifier, tableRef, type TableRef } from './identifiers.js';

/** Options of {@link prune}. */
export interface PruneOptions {
  /** Only prune this consumer's keys. Default: every consumer. */
  consumer?: string;
  /** Delete keys processed before this instant, or more than this many ms ago. */
  olderThan: Date | number;
  /** Rows deleted per statement, so pruning never holds long locks. Default 1000. */
  batchSize?: number;
  /** Schema of the dedup table. Default `public`. */
  schema?: string;
  /** Dedup table name. Default `processed_messages`. */
  table?: string;
  /** Stop early (between batches) when aborted. */
  signal?: AbortSignal;
  /**
   * Largest share of the time spent deleting, above 0 and at most 1 (default 1: batches
   * back to back). Below 1, after each batch it waits `elapsed × (1 / dutyCycle − 1)`,
   * so a backlog of millions of rows is worked off beside the claims, not ahead of them.
   */
  dutyCycle?: number;
}

/**
 * Deletes dedup rows older than the window in bounded batches and returns how many
 * were deleted. The window must outlast the longest redelivery path (visibility
 * timeout × max receives, DLQ redrive, Kafka replays): a key pruned too early lets a
 * late redelivery apply its effect again.
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
   * The column of each row's own expiry, where the table has one: a row is then never
   * deleted before it, whatever the prune's window, and a row whose expiry is NULL (its
   * writer set no lifetime, or it predates the column) only by a prune with a window.
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

/** The dedup table's rows, all consumers' or one's. */
export function dedupPruneTarget(ref: TableRef, consumer: string | undefined): PruneTarget {
  return {
    ref,
    keyColumns: ['consumer', 'message_key'],
    timeColumn: 'processed_at',
    ...(consumer !== undefined ? { only: { column: 'consumer', value: consumer } } : {}),
  };
}

/**
 * When a prune runs, on the database's clock: `now`, which a row's own expiry is held
 * against, and `cutoff` (now minus the window), or undefined for a prune by expiry alone.
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
  const clock = await pruneClock(pool, options.olderThan);
  const { where, params } = prunable(target, clock);
  // SKIP LOCKED: never wait behind a worker that is touching the same rows.
  const sql = `
    DELETE FROM ${table} t
     WHERE (${target.keyColumns.map((c) => `t.${quoteIdentifier(c)}`).join(', ')}) IN (
       SELECT ${keys} FROM ${table}
        WHERE ${where}
        LIMIT $${params.length + 1}
        FOR UPDATE SKIP LOCKED)`;
  let total = 0;
  for (;;) {
    if (options.signal?.aborted) return total;
    const started = performance.now();
    const result = await pool.query(sql, [...params, batchSize]).catch((cause: unknown) => {
      throw new DatabaseError('prune', cause);
    });
    const deleted = result.rowCount ?? 0;
    total += deleted;
    if (deleted < batchSize) return total;
    if (duty < 1) await sleep((performance.now() - started) * (1 / duty - 1), options.signal);
  }
}

/**
 * The rows a prune deletes: one owner for the DELETE and for counting them. With an
 * expiry column, a row goes only once its own expiry has passed (NULL: kept, unless the
 * prune has a window); with a window, only rows older than it, as well.
 */
function prunable(target: PruneTarget, clock: PruneClock): { where: string; params: unknown[] } {
  const params: unknown[] = [];
  const conditions: string[] = [];
  const expires =
    target.expiresColumn === undefined ? undefined : quoteIdentifier(target.expiresColumn);
  if (clock.cutoff !== undefined) {
    conditions.push(`${quoteIdentifier(target.timeColumn)} < $${params.push(clock.cutoff)}`);
    if (expires !== undefined)
      conditions.push(`(${expires} IS NULL OR ${expires} < $${params.push(clock.now)})`);
  } else if (expires !== undefined) {
    conditions.push(`${expires} < $${params.push(clock.now)}`);
  }
  const only = target.only;
  if (only !== undefined)
    conditions.push(`${quoteIdentifier(only.column)} = $${params.push(only.value)}`);
  return { where: conditions.join(' AND '), params };
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
  const { where, params } = prunable(target, clock);
  const result = await pool
    .query<{
      n: string;
    }>(`SELECT count(*) AS n FROM ${qualifiedTable(target.ref)} WHERE ${where}`, params)
    .catch((cause: unknown) => {
      throw new DatabaseError('count prunable rows', cause);
    });
  return Number(result.rows[0]?.n ?? 0);
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
