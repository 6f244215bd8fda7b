import type { Pool } from 'pg';
import type { PruneTarget } from '../../store/prune.js';
import {
  estimateRows,
  groupRows,
  listGroups,
  plannerStats,
  type GroupRows,
} from '../../store/table-stats.js';

/** What `stats` counted: the groups listed (at most `limit`) and the whole table's totals. */
export interface Counted {
  groups: GroupRows[];
  /** More groups exist than were listed. */
  truncated: boolean;
  total: { rows: number; olderThanWindow: number | null };
  analyzedAt?: Date | null;
}

/** What to count: every group's rows, or one group's (`target.only`). */
export interface CountRequest {
  /** The whole table's rows; with `group`, that group's. */
  target: (group: string | undefined) => PruneTarget;
  group: string | undefined;
  cutoff: Date | undefined;
  limit: number;
}

/** Exact counts: one pass over the rows counted; the totals cover every group, listed or not. */
export async function exactCounts(pool: Pool, request: CountRequest): Promise<Counted> {
  const groups = await groupRows(pool, request.target(request.group), { cutoff: request.cutoff });
  const sum = (pick: (g: GroupRows) => number | null): number =>
    groups.reduce((total, g) => total + (pick(g) ?? 0), 0);
  return {
    groups: groups.slice(0, request.limit),
    truncated: groups.length > request.limit,
    total: {
      rows: sum((g) => g.rows),
      olderThanWindow: request.cutoff === undefined ? null : sum((g) => g.olderThanWindow),
    },
  };
}

/**
 * Planner estimates: the groups from the primary key (at most `limit` of them), each
 * one's rows from `EXPLAIN`; nothing is scanned. `empty`: the table is known to hold
 * nothing (the planner never estimates zero rows).
 */
export async function estimatedCounts(
  pool: Pool,
  request: CountRequest,
  empty: boolean,
): Promise<Counted> {
  const { cutoff, group, limit } = request;
  const { analyzedAt } = await plannerStats(pool, request.target(undefined).ref);
  if (empty) {
    return {
      groups: [],
      truncated: false,
      total: { rows: 0, olderThanWindow: cutoff === undefined ? null : 0 },
      analyzedAt,
    };
  }
  const names = await listGroups(pool, request.target(group), limit + 1);
  const groups: GroupRows[] = [];
  for (const name of names.slice(0, limit)) {
    const target = request.target(name);
    groups.push({
      group: name,
      rows: await estimateRows(pool, target, {}),
      oldest: null,
      newest: null,
      olderThanWindow: cutoff === undefined ? null : await estimateRows(pool, target, { cutoff }),
    });
  }
  const truncated = names.length > limit;
  if (group !== undefined) {
    const [only] = groups;
    return {
      groups,
      truncated,
      total: {
        rows: only?.rows ?? 0,
        olderThanWindow: cutoff === undefined ? null : (only?.olderThanWindow ?? 0),
      },
      analyzedAt,
    };
  }
  const all = request.target(undefined);
  return {
    groups,
    truncated,
    total: {
      rows: await estimateRows(pool, all, {}),
      olderThanWindow: cutoff === undefined ? null : await estimateRows(pool, all, { cutoff }),
    },
    analyzedAt,
  };
}
