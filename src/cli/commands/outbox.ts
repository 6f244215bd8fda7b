import { ConfigurationError } from '../../errors.js';
import { listParked, requeueParked } from '../../outbox/parked.js';
import { outboxStats } from '../../outbox/stats.js';
import { outboxRef } from '../../outbox/table.js';
import { qualifiedTable, quoteIdentifier } from '../../store/identifiers.js';
import { flag, parseInteger, stringValue } from '../args.js';
import type { Command } from '../command.js';
import { formatCount, formatFields, formatTable } from '../output.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** `outbox`: the outbox's lag and parked rows; `--requeue` puts parked rows back. */
export const outboxCommand: Command = {
  name: 'outbox',
  summary: 'Pending and parked rows of the outbox, its lag; requeue parked rows',
  usage:
    '[--requeue] [--ids <id,...>] [--destination <name>] [--limit <n>] [--outbox-table <name>] [options]',
  description: [
    "Shows how many outbox rows are pending and parked, the age of the oldest pending one (the relays' lag, on the database's clock), the same per destination (a destination no running relay publishes shows there, its rows pending), and the parked rows, oldest first, with their last error: rows the relays gave up on after maxAttempts or an error that cannot succeed later. A parked row holds back the later rows of its ordering key.",
    "--requeue puts the parked rows shown (all of them, --destination's, or --ids) back to pending with their attempts reset, and wakes the relays. Requeue once the cause is fixed.",
  ].join('\n\n'),
  options: {
    requeue: { type: 'boolean', description: 'Put the selected parked rows back in line' },
    ids: {
      type: 'string',
      value: '<id,...>',
      description: 'Only these rows (comma-separated ids)',
    },
    destination: {
      type: 'string',
      value: '<name>',
      description: 'Only rows for this destination (counts, parked rows, requeue)',
    },
    limit: { type: 'string', value: '<n>', description: 'Most parked rows listed (default 100)' },
    'outbox-table': {
      type: 'string',
      value: '<name>',
      description: 'The outbox table (default eo_outbox)',
    },
  },
  positionals: [],
  examples: [
    'effectively-once outbox',
    'effectively-once outbox --destination payments --requeue',
    'effectively-once outbox --ids 0190b6b2-6c3e-7a41-9d2e-4f1c2b3a4d5e --requeue --json',
  ],
  async run(ctx) {
    const table = stringValue(ctx.args, 'outbox-table');
    if (table !== undefined) quoteIdentifier(table, '--outbox-table');
    const ref = outboxRef({ schema: ctx.ref.schema, table });
    const idsText = stringValue(ctx.args, 'ids');
    const ids = idsText?.split(',').map((id) => id.trim());
    for (const id of ids ?? [])
      if (!UUID.test(id))
        throw new ConfigurationError('--ids', `"${id}" is not an outbox id (a UUID)`);
    const limitText = stringValue(ctx.args, 'limit');
    const limit = limitText === undefined ? 100 : parseInteger(limitText, '--limit', 1, 10_000);
    const destination = stringValue(ctx.args, 'destination');
    const pool = await ctx.pool();
    const requeued = flag(ctx.args, 'requeue')
      ? await requeueParked(pool, { ...ref, ids, destination })
      : null;
    const stats = await outboxStats(pool, { ...ref, destination });
    const parked = (await listParked(pool, { ...ref, destination, limit })).filter(
      (row) => ids === undefined || ids.includes(row.id),
    );
    const lines = [
      ...(requeued === null ? [] : [`Requeued ${formatCount(requeued)} parked rows.`]),
      formatFields([
        ['table', qualifiedTable(ref)],
        ['pending', formatCount(stats.pending)],
        ['parked', formatCount(stats.parked)],
        [
          'oldest pending',
          stats.pending === 0 ? '-' : `${Math.round(stats.oldestPendingAgeMs)} ms ago`,
        ],
      ]),
    ];
    if (stats.byDestination.length > 0)
      lines.push(
        formatTable(
          [
            { header: 'destination' },
            { header: 'pending', align: 'right' },
            { header: 'parked', align: 'right' },
            { header: 'oldest_pending_ms', align: 'right' },
          ],
          stats.byDestination.map((d) => [
            d.destination,
            formatCount(d.pending),
            formatCount(d.parked),
            d.pending === 0 ? '-' : String(Math.round(d.oldestPendingAgeMs)),
          ]),
        ),
      );
    if (parked.length > 0)
      lines.push(
        formatTable(
          [
            { header: 'id' },
            { header: 'destination' },
            { header: 'ordering_key' },
            { header: 'attempts', align: 'right' },
            { header: 'last_error' },
          ],
          parked.map((p) => [
            p.id,
            p.destination,
            p.orderingKey ?? '-',
            String(p.attempts),
            (p.lastError ?? '').replace(/\s+/g, ' ').slice(0, 120),
          ]),
        ),
      );
    return {
      json: {
        schema: ref.schema,
        table: ref.table,
        requeued,
        ...stats,
        parkedRows: parked.map((p) => ({ ...p, createdAt: p.createdAt.toISOString() })),
      },
      text: lines.join('\n\n'),
    };
  },
};
