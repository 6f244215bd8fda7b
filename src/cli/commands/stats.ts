import { qualifiedTable } from '../../store/identifiers.js';
import { pruneCutoff } from '../../store/prune.js';
import { tableRange, tableSizes } from '../../store/table-stats.js';
import { flag, parseInteger, stringValue } from '../args.js';
import type { Command } from '../command.js';
import { parseDuration } from '../duration.js';
import { FAMILY_OPTIONS, selectFamily } from '../families.js';
import {
  formatBytes,
  formatCount,
  formatFields,
  formatTable,
  formatTime,
  isoOrNull,
} from '../output.js';
import { estimatedCounts, exactCounts } from './stats-counts.js';

/** Groups listed unless `--limit` says otherwise. */
const DEFAULT_LIMIT = 100;

/** `stats`: rows, ages and sizes of the dedup table per consumer, or of the HTTP key table per scope. */
export const statsCommand: Command = {
  name: 'stats',
  summary:
    'Rows, oldest/newest row and sizes of the dedup table (per consumer) or key table (per scope)',
  usage:
    '[--family <name>] [--consumer <name> | --scope <scope>] [--window <duration>] [--estimate] [--limit <n>] [options]',
  description: [
    "Per consumer (the dedup table) or per scope (--family http-keys, the HTTP key table): rows, oldest and newest row (processed_at, created_at) and, with --window, how many rows are older than the window (what `prune --older-than` would delete, cutoff on the database's clock). For the table: total, table and index sizes from the catalog, and its oldest and newest row from the ends of the time index.",
    "Exact counts read every row once (one scan, parallel where Postgres allows): seconds on a table of millions of rows. --estimate reads no rows: consumers or scopes are found by skipping through the primary key, counts are the planner's estimates from the table statistics (as fresh as the last ANALYZE), and per-group oldest/newest are left out.",
    'At most --limit consumers or scopes are listed, in name order; the totals cover them all.',
  ].join('\n\n'),
  options: {
    ...FAMILY_OPTIONS,
    consumer: {
      type: 'string',
      value: '<name>',
      description: 'Only this consumer (default: every consumer)',
    },
    scope: {
      type: 'string',
      value: '<scope>',
      description: 'With --family http-keys: only this scope (default: every scope)',
    },
    window: {
      type: 'string',
      value: '<duration>',
      description: 'Also count rows older than this (90s, 15m, 7d, 2w): what prune would delete',
    },
    estimate: {
      type: 'boolean',
      description: 'Planner estimates instead of exact counts (no scan; instant at any size)',
    },
    limit: {
      type: 'string',
      value: '<n>',
      description: `Most consumers or scopes listed, 1 to 100000 (default: ${DEFAULT_LIMIT})`,
    },
  },
  positionals: [],
  examples: [
    'effectively-once stats --window 7d',
    'effectively-once stats --estimate --json',
    'effectively-once stats --family http-keys --window 24h',
  ],
  async run(ctx) {
    const { entry, rows, ref, group } = selectFamily('stats', ctx.args, ctx.ref);
    const window = stringValue(ctx.args, 'window');
    const windowMs = window === undefined ? undefined : parseDuration(window, '--window');
    const limitText = stringValue(ctx.args, 'limit');
    const limit =
      limitText === undefined ? DEFAULT_LIMIT : parseInteger(limitText, '--limit', 1, 100_000);
    const estimate = flag(ctx.args, 'estimate');
    const pool = await ctx.pool();
    const cutoff = windowMs === undefined ? undefined : await pruneCutoff(pool, windowMs);
    // One after the other (both take milliseconds): a missing table fails the same way each time.
    const sizes = await tableSizes(pool, ref);
    const range = await tableRange(pool, rows.target(ref, undefined));
    const request = {
      target: (g: string | undefined) => rows.target(ref, g),
      group,
      cutoff,
      limit,
    };
    const counted = estimate
      ? await estimatedCounts(pool, request, range.oldest === null)
      : await exactCounts(pool, request);
    const label = rows.group;
    const json = {
      family: entry.family.name,
      schema: ref.schema,
      table: ref.table,
      [label]: group ?? null,
      estimate,
      ...(estimate ? { analyzedAt: isoOrNull(counted.analyzedAt ?? null) } : {}),
      databaseTime: range.now.toISOString(),
      sizes,
      oldest: isoOrNull(range.oldest),
      newest: isoOrNull(range.newest),
      window:
        window === undefined || cutoff === undefined
          ? null
          : { olderThan: window, olderThanMs: windowMs, cutoff: cutoff.toISOString() },
      total: counted.total,
      [rows.groups]: counted.groups.map((g) => ({
        [label]: g.group,
        rows: g.rows,
        oldest: isoOrNull(g.oldest),
        newest: isoOrNull(g.newest),
        olderThanWindow: g.olderThanWindow,
      })),
      truncated: counted.truncated,
    };
    const n = (v: number): string => (estimate ? `~${formatCount(v)}` : formatCount(v));
    const whose = group === undefined ? '' : ` (${label} ${JSON.stringify(group)})`;
    const fields: Array<[string, string]> = [
      [
        'size',
        `${formatBytes(sizes.totalBytes)} (table ${formatBytes(sizes.tableBytes)}, indexes ${formatBytes(sizes.indexesBytes)})`,
      ],
      ['indexes', sizes.indexes.map((i) => `${i.name} ${formatBytes(i.bytes)}`).join(', ')],
      ['oldest row', formatTime(range.oldest)],
      ['newest row', formatTime(range.newest)],
      [`rows${whose}`, n(counted.total.rows)],
    ];
    if (window !== undefined && cutoff !== undefined) {
      const family = entry.tableOption === 'table' ? '' : `--family ${entry.family.name} `;
      fields.push([
        `older than ${window}${whose}`,
        `${n(counted.total.olderThanWindow ?? 0)} (${rows.aged} before ${cutoff.toISOString()}: what \`prune ${family}--older-than ${window}\` deletes)`,
      ]);
    }
    if (estimate) {
      fields.push([
        'estimates',
        counted.analyzedAt == null
          ? 'the table was never analyzed: estimates are guesses (run ANALYZE)'
          : `planner statistics from ${counted.analyzedAt.toISOString()} (ANALYZE), scaled to the current size`,
      ]);
    }
    const columns = [
      { header: label },
      { header: 'rows', align: 'right' as const },
      { header: 'oldest' },
      { header: 'newest' },
      ...(window === undefined
        ? []
        : [{ header: `older than ${window}`, align: 'right' as const }]),
    ];
    const table =
      counted.groups.length === 0
        ? `No rows${whose}.`
        : formatTable(
            columns,
            counted.groups.map((g) => [
              g.group,
              n(g.rows),
              formatTime(g.oldest),
              formatTime(g.newest),
              ...(window === undefined ? [] : [n(g.olderThanWindow ?? 0)]),
            ]),
          );
    const more = counted.truncated
      ? `\n(the first ${formatCount(limit)} ${rows.groups} by name; --limit lists more)`
      : '';
    return {
      json,
      text: `Table ${qualifiedTable(ref)}\n${formatFields(fields)}\n\n${table}${more}`,
    };
  },
};
