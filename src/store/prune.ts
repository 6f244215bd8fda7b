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
  /** Only rows whose `column` equals `value` (one consumer's, one scope's). */
  only?: { column: string; value: string };
}

/** The options every prune shares. */
export type PruneBounds = Pick<PruneOptions, 'olderThan' | 'batchSize' | 'signal' | 'dutyCycle'>;

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
 * Deletes the target's rows older than `olderThan` in bounded batches, SKIP LOCKED,
 * busy at most `dutyCycle` of the time, with the cutoff on the database's clock.
 */
export async function pruneTable(
  pool: Pool,
  target: PruneTarget,
  options: PruneBounds,
): Promise<number> {
  const batchSize = intOption('batchSize', options.batchSize, 1000, 1, MAX_PRUNE_BATCH);
  const duty = fractionOption('dutyCycle', options.dutyCycle, 1);
  const table = qualifiedTable(target.ref);
  const keys = target.keyColumns.map((c) => quoteIdentifier(c)).join(', ');
  const cutoff = await pruneCutoff(pool, options.olderThan);
  const { where, params } = prunable(target, cutoff);
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

/** The rows a prune deletes: one owner for the DELETE and for counting them. */
function prunable(target: PruneTarget, cutoff: Date): { where: string; params: unknown[] } {
  const time = `${quoteIdentifier(target.timeColumn)} < $1`;
  const only = target.only;
  return only === undefined
    ? { where: time, params: [cutoff] }
    : { where: `${time} AND ${quoteIdentifier(only.column)} = $2`, params: [cutoff, only.value] };
}

/**
 * How many rows a prune of `target` would delete for this cutoff (what a dry run
 * reports). Counts through the time index: reads every prunable entry, so it takes
 * about as long as the backlog is large, but it deletes and locks nothing.
 */
export async function countPrunable(
  pool: Pick<Pool, 'query'>,
  target: PruneTarget,
  cutoff: Date,
): Promise<number> {
  const { where, params } = prunable(target, cutoff);
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
