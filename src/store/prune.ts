import type { Pool } from 'pg';
import { ConfigurationError, DatabaseError } from '../errors.js';
import { fractionOption } from '../option-checks.js';
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
  return pruneTable(
    pool,
    {
      ref: tableRef(options),
      keyColumns: ['consumer', 'message_key'],
      timeColumn: 'processed_at',
      ...(options.consumer !== undefined
        ? { only: { column: 'consumer', value: options.consumer } }
        : {}),
    },
    options,
  );
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

/**
 * Deletes the target's rows older than `olderThan` in bounded batches, SKIP LOCKED,
 * busy at most `dutyCycle` of the time, with the cutoff on the database's clock.
 */
export async function pruneTable(
  pool: Pool,
  target: PruneTarget,
  options: PruneBounds,
): Promise<number> {
  const batchSize = options.batchSize ?? 1000;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 100_000) {
    throw new ConfigurationError('batchSize', 'must be an integer from 1 to 100000', { batchSize });
  }
  const duty = fractionOption('dutyCycle', options.dutyCycle, 1);
  checkOlderThan(options.olderThan);
  const table = qualifiedTable(target.ref);
  const keys = target.keyColumns.map((c) => quoteIdentifier(c)).join(', ');
  const time = quoteIdentifier(target.timeColumn);
  const only = target.only;
  const cutoff = await cutoffOf(pool, options.olderThan);
  // SKIP LOCKED: never wait behind a worker that is touching the same rows.
  const sql = `
    DELETE FROM ${table} t
     WHERE (${target.keyColumns.map((c) => `t.${quoteIdentifier(c)}`).join(', ')}) IN (
       SELECT ${keys} FROM ${table}
        WHERE ${time} < $1 ${only ? `AND ${quoteIdentifier(only.column)} = $3` : ''}
        LIMIT $2
        FOR UPDATE SKIP LOCKED)`;
  const params: unknown[] = only ? [cutoff, batchSize, only.value] : [cutoff, batchSize];
  let total = 0;
  for (;;) {
    if (options.signal?.aborted) return total;
    const started = performance.now();
    const result = await pool.query(sql, params).catch((cause: unknown) => {
      throw new DatabaseError('prune', cause);
    });
    const deleted = result.rowCount ?? 0;
    total += deleted;
    if (deleted < batchSize) return total;
    if (duty < 1) await sleep((performance.now() - started) * (1 / duty - 1), options.signal);
  }
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
 * A window in ms is measured on the database's clock, the one that wrote
 * `processed_at`: a worker whose clock runs ahead would otherwise prune keys younger
 * than the window (and let their late redeliveries apply again).
 */
async function cutoffOf(pool: Pool, olderThan: Date | number): Promise<Date> {
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
