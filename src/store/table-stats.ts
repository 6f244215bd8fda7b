import type { Pool } from 'pg';
import { DatabaseError } from '../errors.js';
import { qualifiedTable, quoteIdentifier, type TableRef } from './identifiers.js';
import type { PruneTarget } from './prune.js';

type Db = Pick<Pool, 'query'>;

/**
 * The rows of a table family as these statistics read them: a prune's target (the
 * table, its primary key, the time rows age by, and optionally one group's rows). Rows
 * are grouped by the primary key's first column: the consumer of the dedup table, the
 * scope (tenant) of the HTTP key table.
 */
export type RowsTarget = Pick<
  PruneTarget,
  'ref' | 'keyColumns' | 'timeColumn' | 'only' | 'expiresColumn'
>;

/** On-disk size of a table, from the catalog (no scan). */
export interface TableSizes {
  totalBytes: number;
  /** Heap, TOAST, free space and visibility maps. */
  tableBytes: number;
  indexesBytes: number;
  indexes: Array<{ name: string; bytes: number }>;
}

/** One group's rows (a consumer's, a scope's); `olderThanWindow` is null without a window. */
export interface GroupRows {
  group: string;
  rows: number;
  oldest: Date | null;
  newest: Date | null;
  olderThanWindow: number | null;
}

/** The oldest and newest row by the time column (two ends of its index) and the database's now(). */
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

function groupColumn(target: RowsTarget): string {
  const column = target.keyColumns[0];
  if (column === undefined) throw new TypeError('a rows target needs its primary key columns');
  return quoteIdentifier(column);
}

/** `WHERE <group> = $n`, or nothing, for the target's `only`. */
function onlyGroup(target: RowsTarget, params: unknown[]): string[] {
  const only = target.only;
  return only === undefined
    ? []
    : [`${quoteIdentifier(only.column)} = $${params.push(only.value)}`];
}

/** min/max of the time column over the whole table: one probe at each end of its index. */
export async function tableRange(db: Db, target: RowsTarget): Promise<TableRange> {
  const time = quoteIdentifier(target.timeColumn);
  const [row] = await query<{ oldest: Date | null; newest: Date | null; now: Date }>(
    db,
    'stats (range)',
    `SELECT min(${time}) AS oldest, max(${time}) AS newest, now() AS now
       FROM ${qualifiedTable(target.ref)}`,
  );
  return { oldest: row?.oldest ?? null, newest: row?.newest ?? null, now: row?.now ?? new Date() };
}

/**
 * What a prune with a window also requires of a row where rows carry their own expiry
 * (see `prunable` in prune.ts): that it has passed, or that the row has none.
 */
function expiryAllows(target: RowsTarget): string {
  if (target.expiresColumn === undefined) return '';
  const expires = quoteIdentifier(target.expiresColumn);
  return ` AND (${expires} IS NULL OR ${expires} < now() OR ${expires} = 'infinity')`;
}

/**
 * Exact rows, oldest and newest per group, and how many are older than `cutoff`, in
 * one pass: a (parallel) scan of the whole table, or of one group's part of the
 * primary key with the target's `only`. Its time grows with the rows it counts.
 */
export async function groupRows(
  db: Db,
  target: RowsTarget,
  options: { cutoff?: Date | undefined },
): Promise<GroupRows[]> {
  const params: unknown[] = [];
  const group = groupColumn(target);
  const time = quoteIdentifier(target.timeColumn);
  const older =
    options.cutoff === undefined
      ? 'NULL::bigint'
      : `count(*) FILTER (WHERE ${time} < $${params.push(options.cutoff)}${expiryAllows(target)})`;
  const where = onlyGroup(target, params);
  const rows = await query<{
    grp: string;
    rows: string;
    oldest: Date;
    newest: Date;
    older: string | null;
  }>(
    db,
    'stats (per group)',
    `SELECT ${group} AS grp, count(*) AS rows, min(${time}) AS oldest, max(${time}) AS newest,
            ${older} AS older
       FROM ${qualifiedTable(target.ref)} ${where.length === 0 ? '' : `WHERE ${where[0]}`}
      GROUP BY ${group} ORDER BY ${group}`,
    params,
  );
  return rows.map((r) => ({
    group: r.grp,
    rows: Number(r.rows),
    oldest: r.oldest,
    newest: r.newest,
    olderThanWindow: r.older === null ? null : Number(r.older),
  }));
}

/**
 * The distinct groups (consumers, scopes) in order, by skipping through the primary
 * key (one index probe per group, whatever the row count): a recursive "loose index
 * scan". With the target's `only`, that group if it has rows; `limit` stops it after
 * that many.
 */
export async function listGroups(db: Db, target: RowsTarget, limit?: number): Promise<string[]> {
  const table = qualifiedTable(target.ref);
  const group = groupColumn(target);
  const params: unknown[] = [];
  const only = onlyGroup(target, params).map((condition) => ` AND t.${condition}`)[0] ?? '';
  const bounded = limit === undefined ? '' : ` LIMIT $${params.push(Math.trunc(limit))}`;
  const rows = await query<{ grp: string }>(
    db,
    'list groups',
    `WITH RECURSIVE c AS (
       (SELECT t.${group} AS grp FROM ${table} t WHERE true${only} ORDER BY t.${group} LIMIT 1)
       UNION ALL
       SELECT (SELECT t.${group} FROM ${table} t WHERE t.${group} > c.grp${only}
                ORDER BY t.${group} LIMIT 1)
         FROM c WHERE c.grp IS NOT NULL)
     SELECT grp FROM c WHERE grp IS NOT NULL${bounded}`,
    params,
  );
  return rows.map((r) => r.grp);
}

/**
 * The planner's row estimate for the target's rows (one group's with `only`) older
 * than `cutoff` (or any age), from `EXPLAIN`: table statistics (ANALYZE's sample, the
 * time column's histogram) scaled to the table's current size. Nothing is scanned.
 */
export async function estimateRows(
  db: Db,
  target: RowsTarget,
  options: { cutoff?: Date | undefined },
): Promise<number> {
  const params: unknown[] = [];
  const conditions = onlyGroup(target, params);
  if (options.cutoff !== undefined)
    conditions.push(
      `${quoteIdentifier(target.timeColumn)} < $${params.push(options.cutoff)}${expiryAllows(target)}`,
    );
  const where = conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
  const [row] = await query<{ 'QUERY PLAN': Array<{ Plan: { 'Plan Rows': number } }> }>(
    db,
    'stats (estimate)',
    `EXPLAIN (FORMAT JSON) SELECT 1 FROM ${qualifiedTable(target.ref)} ${where}`,
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
