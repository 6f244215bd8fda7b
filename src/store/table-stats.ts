import type { Pool } from 'pg';
import { DatabaseError } from '../errors.js';
import { qualifiedTable, type TableRef } from './identifiers.js';

type Db = Pick<Pool, 'query'>;

/** On-disk size of the dedup table, from the catalog (no scan). */
export interface TableSizes {
  totalBytes: number;
  /** Heap, TOAST, free space and visibility maps. */
  tableBytes: number;
  indexesBytes: number;
  indexes: Array<{ name: string; bytes: number }>;
}

/** One consumer's rows; `olderThanWindow` is null without a window. */
export interface ConsumerRows {
  consumer: string;
  rows: number;
  oldest: Date | null;
  newest: Date | null;
  olderThanWindow: number | null;
}

/** The table's oldest and newest `processed_at` (two ends of its index) and the database's now(). */
export interface TableRange {
  oldest: Date | null;
  newest: Date | null;
  now: Date;
}

/** The planner's statistics of the table: what estimates are made from. */
export interface PlannerStats {
  /** Last ANALYZE (manual or autovacuum), or null when never analyzed. */
  analyzedAt: Date | null;
}

async function query<R extends object>(
  db: Db,
  what: string,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  try {
    const result = await db.query(sql, params);
    return result.rows as R[];
  } catch (cause) {
    throw new DatabaseError(what, cause);
  }
}

/** Sizes from `pg_total_relation_size` and friends: catalog lookups, instant at any size. */
export async function tableSizes(db: Db, ref: TableRef): Promise<TableSizes> {
  const [row] = await query<{
    total: string;
    heap: string;
    indexes: string;
    index_sizes: Array<{ name: string; bytes: number }>;
  }>(
    db,
    'stats (sizes)',
    `SELECT pg_total_relation_size(c.oid) AS total, pg_table_size(c.oid) AS heap,
            pg_indexes_size(c.oid) AS indexes,
            coalesce((SELECT json_agg(json_build_object('name', i.relname, 'bytes', pg_relation_size(i.oid))
                                      ORDER BY i.relname)
                        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                       WHERE x.indrelid = c.oid), '[]') AS index_sizes
       FROM pg_class c WHERE c.oid = $1::regclass`,
    [qualifiedTable(ref)],
  );
  if (row === undefined) throw new DatabaseError('stats (sizes)', new Error('no pg_class row'));
  return {
    totalBytes: Number(row.total),
    tableBytes: Number(row.heap),
    indexesBytes: Number(row.indexes),
    indexes: row.index_sizes.map((i) => ({ name: i.name, bytes: Number(i.bytes) })),
  };
}

/** min/max of `processed_at`: one probe at each end of its index. */
export async function tableRange(db: Db, ref: TableRef): Promise<TableRange> {
  const [row] = await query<{ oldest: Date | null; newest: Date | null; now: Date }>(
    db,
    'stats (range)',
    `SELECT min(processed_at) AS oldest, max(processed_at) AS newest, now() AS now
       FROM ${qualifiedTable(ref)}`,
  );
  return { oldest: row?.oldest ?? null, newest: row?.newest ?? null, now: row?.now ?? new Date() };
}

/**
 * Exact rows, oldest and newest per consumer, and how many are older than `cutoff`,
 * in one pass: a (parallel) scan of the whole table, or of one consumer's part of the
 * primary key with `consumer`. Its time grows with the rows it counts.
 */
export async function consumerRows(
  db: Db,
  ref: TableRef,
  options: { consumer?: string | undefined; cutoff?: Date | undefined },
): Promise<ConsumerRows[]> {
  const params: unknown[] = [];
  const older =
    options.cutoff === undefined
      ? 'NULL::bigint'
      : `count(*) FILTER (WHERE processed_at < $${params.push(options.cutoff)})`;
  const where =
    options.consumer === undefined ? '' : `WHERE consumer = $${params.push(options.consumer)}`;
  const rows = await query<{
    consumer: string;
    rows: string;
    oldest: Date;
    newest: Date;
    older: string | null;
  }>(
    db,
    'stats (per consumer)',
    `SELECT consumer, count(*) AS rows, min(processed_at) AS oldest, max(processed_at) AS newest,
            ${older} AS older
       FROM ${qualifiedTable(ref)} ${where}
      GROUP BY consumer ORDER BY consumer`,
    params,
  );
  return rows.map((r) => ({
    consumer: r.consumer,
    rows: Number(r.rows),
    oldest: r.oldest,
    newest: r.newest,
    olderThanWindow: r.older === null ? null : Number(r.older),
  }));
}

/**
 * The distinct consumers, by skipping through the primary key (one index probe per
 * consumer, whatever the row count): a recursive "loose index scan".
 */
export async function listConsumers(db: Db, ref: TableRef): Promise<string[]> {
  const table = qualifiedTable(ref);
  const rows = await query<{ consumer: string }>(
    db,
    'list consumers',
    `WITH RECURSIVE c AS (
       (SELECT consumer FROM ${table} ORDER BY consumer LIMIT 1)
       UNION ALL
       SELECT (SELECT t.consumer FROM ${table} t WHERE t.consumer > c.consumer
                ORDER BY t.consumer LIMIT 1)
         FROM c WHERE c.consumer IS NOT NULL)
     SELECT consumer FROM c WHERE consumer IS NOT NULL`,
  );
  return rows.map((r) => r.consumer);
}

/**
 * The planner's row estimate for rows of `consumer` (or all) older than `cutoff` (or
 * any age), from `EXPLAIN`: table statistics (ANALYZE's sample, the `processed_at`
 * histogram) scaled to the table's current size. Nothing is scanned.
 */
export async function estimateRows(
  db: Db,
  ref: TableRef,
  options: { consumer?: string | undefined; cutoff?: Date | undefined },
): Promise<number> {
  const params: unknown[] = [];
  const conditions: string[] = [];
  if (options.consumer !== undefined)
    conditions.push(`consumer = $${params.push(options.consumer)}`);
  if (options.cutoff !== undefined)
    conditions.push(`processed_at < $${params.push(options.cutoff)}`);
  const where = conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
  const [row] = await query<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }>(
    db,
    'stats (estimate)',
    `EXPLAIN (FORMAT JSON) SELECT 1 FROM ${qualifiedTable(ref)} ${where}`,
    params,
  );
  const estimate = row?.['QUERY PLAN'][0]?.Plan['Plan Rows'];
  if (typeof estimate !== 'number') {
    throw new DatabaseError('stats (estimate)', new Error('EXPLAIN returned no row estimate'));
  }
  return Math.round(estimate);
}

/** When the table was last analyzed: how stale estimates may be. */
export async function plannerStats(db: Db, ref: TableRef): Promise<PlannerStats> {
  const [row] = await query<{ analyzed_at: Date | null }>(
    db,
    'stats (planner statistics)',
    `SELECT greatest(last_analyze, last_autoanalyze) AS analyzed_at
       FROM pg_stat_all_tables WHERE relid = $1::regclass`,
    [qualifiedTable(ref)],
  );
  return { analyzedAt: row?.analyzed_at ?? null };
}
