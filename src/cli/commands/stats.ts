import type { Pool } from 'pg';
import { qualifiedTable, type TableRef } from '../../store/identifiers.js';
import { pruneCutoff } from '../../store/prune.js';
import {
  consumerRows,
  estimateRows,
  listConsumers,
  plannerStats,
  tableRange,
  tableSizes,
  type ConsumerRows,
} from '../../store/table-stats.js';
import { flag, stringValue } from '../args.js';
import type { Command } from '../command.js';
import { parseDuration } from '../duration.js';
import {
  formatBytes,
  formatCount,
  formatFields,
  formatTable,
  formatTime,
  isoOrNull,
} from '../output.js';

interface Counted {
  consumers: ConsumerRows[];
  total: { rows: number; olderThanWindow: number | null };
  analyzedAt?: Date | null;
}

/** `stats`: rows, ages and sizes of the dedup table, per consumer. */
export const statsCommand: Command = {
  name: 'stats',
  summary: 'Rows, oldest/newest processed_at and sizes of the dedup table, per consumer',
  usage: '[--consumer <name>] [--window <duration>] [--estimate] [options]',
  description: [
    "Per consumer: rows, oldest and newest processed_at and, with --window, how many rows are older than the window (what `prune --older-than` would delete, cutoff on the database's clock). For the table: total, table and index sizes from the catalog, and its oldest and newest processed_at from the ends of the processed_at index.",
    "Exact counts read every row once (one scan, parallel where Postgres allows): seconds on a table of millions of rows. --estimate reads no rows: consumers are found by skipping through the primary key, counts are the planner's estimates from the table statistics (as fresh as the last ANALYZE), and per-consumer oldest/newest are left out.",
  ].join('\n\n'),
  options: {
    consumer: {
      type: 'string',
      value: '<name>',
      description: 'Only this consumer (default: every consumer)',
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
  },
  positionals: [],
  examples: ['effectively-once stats --window 7d', 'effectively-once stats --estimate --json'],
  async run(ctx) {
    const window = stringValue(ctx.args, 'window');
    const windowMs = window === undefined ? undefined : parseDuration(window, '--window');
    const consumer = stringValue(ctx.args, 'consumer');
    const estimate = flag(ctx.args, 'estimate');
    const pool = await ctx.pool();
    const cutoff = windowMs === undefined ? undefined : await pruneCutoff(pool, windowMs);
    // One after the other (both take milliseconds): a missing table fails the same way each time.
    const sizes = await tableSizes(pool, ctx.ref);
    const range = await tableRange(pool, ctx.ref);
    const counted = estimate
      ? await estimated(pool, ctx.ref, consumer, cutoff, range.oldest === null)
      : await exact(pool, ctx.ref, consumer, cutoff);
    const json = {
      schema: ctx.ref.schema,
      table: ctx.ref.table,
      consumer: consumer ?? null,
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
      consumers: counted.consumers.map((c) => ({
        consumer: c.consumer,
        rows: c.rows,
        oldest: isoOrNull(c.oldest),
        newest: isoOrNull(c.newest),
        olderThanWindow: c.olderThanWindow,
      })),
    };
    const n = (v: number): string => (estimate ? `~${formatCount(v)}` : formatCount(v));
    const whose = consumer === undefined ? '' : ` (consumer "${consumer}")`;
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
      fields.push([
        `older than ${window}${whose}`,
        `${n(counted.total.olderThanWindow ?? 0)} (processed before ${cutoff.toISOString()}: what \`prune --older-than ${window}\` deletes)`,
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
      { header: 'consumer' },
      { header: 'rows', align: 'right' as const },
      { header: 'oldest' },
      { header: 'newest' },
      ...(window === undefined
        ? []
        : [{ header: `older than ${window}`, align: 'right' as const }]),
    ];
    const table =
      counted.consumers.length === 0
        ? `No rows${whose}.`
        : formatTable(
            columns,
            counted.consumers.map((c) => [
              c.consumer,
              n(c.rows),
              formatTime(c.oldest),
              formatTime(c.newest),
              ...(window === undefined ? [] : [n(c.olderThanWindow ?? 0)]),
            ]),
          );
    return {
      json,
      text: `Table ${qualifiedTable(ctx.ref)}\n${formatFields(fields)}\n\n${table}`,
    };
  },
};

async function exact(
  pool: Pool,
  ref: TableRef,
  consumer: string | undefined,
  cutoff: Date | undefined,
): Promise<Counted> {
  const consumers = await consumerRows(pool, ref, { consumer, cutoff });
  const sum = (pick: (c: ConsumerRows) => number | null): number =>
    consumers.reduce((total, c) => total + (pick(c) ?? 0), 0);
  return {
    consumers,
    total: {
      rows: sum((c) => c.rows),
      olderThanWindow: cutoff === undefined ? null : sum((c) => c.olderThanWindow),
    },
  };
}

async function estimated(
  pool: Pool,
  ref: TableRef,
  consumer: string | undefined,
  cutoff: Date | undefined,
  empty: boolean,
): Promise<Counted> {
  const { analyzedAt } = await plannerStats(pool, ref);
  // The planner never estimates zero rows; an empty table is known to be empty.
  if (empty) {
    return {
      consumers: [],
      total: { rows: 0, olderThanWindow: cutoff === undefined ? null : 0 },
      analyzedAt,
    };
  }
  const names = (await listConsumers(pool, ref)).filter(
    (name) => consumer === undefined || name === consumer,
  );
  const consumers: ConsumerRows[] = [];
  for (const name of names) {
    consumers.push({
      consumer: name,
      rows: await estimateRows(pool, ref, { consumer: name }),
      oldest: null,
      newest: null,
      olderThanWindow:
        cutoff === undefined ? null : await estimateRows(pool, ref, { consumer: name, cutoff }),
    });
  }
  if (consumer !== undefined) {
    const [only] = consumers;
    return {
      consumers,
      total: {
        rows: only?.rows ?? 0,
        olderThanWindow: cutoff === undefined ? null : (only?.olderThanWindow ?? 0),
      },
      analyzedAt,
    };
  }
  return {
    consumers,
    total: {
      rows: await estimateRows(pool, ref, {}),
      olderThanWindow: cutoff === undefined ? null : await estimateRows(pool, ref, { cutoff }),
    },
    analyzedAt,
  };
}
