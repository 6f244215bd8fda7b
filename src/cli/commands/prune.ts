import { ConfigurationError } from '../../errors.js';
import { qualifiedTable } from '../../store/identifiers.js';
import { countPrunable, MAX_PRUNE_BATCH, pruneClock, pruneTable } from '../../store/prune.js';
import { flag, parseFraction, parseInteger, stringValue } from '../args.js';
import { EXIT, type Command } from '../command.js';
import { parseDuration } from '../duration.js';
import { FAMILY_OPTIONS, selectFamily } from '../families.js';
import { formatCount } from '../output.js';

/** `prune`: the library's `prune()` / `Idempotency.prune()` from a shell, with a dry run. */
export const pruneCommand: Command = {
  name: 'prune',
  summary: 'Delete dedup rows or HTTP keys older than a window (or count them with --dry-run)',
  usage:
    '--older-than <duration> | --expired [--family <name>] [--consumer <name> | --scope <scope>] [--dry-run] [options]',
  description: [
    "Deletes the dedup table's rows whose processed_at is older than the window (or, with --family http-keys, the HTTP key table's rows whose created_at is), as the library's prune() and Idempotency.prune() do. A row whose own expiry (expires_at, written at the claim from its writer's retention) has not passed is never deleted, and a row without one only with --older-than; with --expired instead of a window, the rows whose own expiry passed. Like the library's: batches of --batch-size rows, FOR UPDATE SKIP LOCKED (it never waits behind a worker), and with --duty-cycle below 1 a pause after each batch so the claims keep their share of the database. The cutoff is now() minus the window on the database's clock, the one that wrote the rows.",
    "The window must outlast the longest way a message can come back (visibility timeout x receives, DLQ redrive, Kafka replays), and for HTTP keys your clients' retries: a key pruned too early lets a late redelivery or retry apply its effect again.",
    'On SIGINT / SIGTERM it stops after the current batch, reports what it deleted and exits 130.',
  ].join('\n\n'),
  options: {
    ...FAMILY_OPTIONS,
    'older-than': {
      type: 'string',
      value: '<duration>',
      description:
        'Window: a whole number and a unit s, m, h, d or w (90s, 15m, 7d, 2w). This or --expired is required',
    },
    consumer: {
      type: 'string',
      value: '<name>',
      description: "Only this consumer's rows (default: every consumer)",
    },
    scope: {
      type: 'string',
      value: '<scope>',
      description: "With --family http-keys: only this scope's keys (default: every scope)",
    },
    expired: {
      type: 'boolean',
      description: 'Instead of a window: the rows whose own expiry (their retention) passed',
    },
    'dry-run': { type: 'boolean', description: 'Count what would be deleted; delete nothing' },
    'batch-size': {
      type: 'string',
      value: '<n>',
      description: `Rows per DELETE, 1 to ${MAX_PRUNE_BATCH} (default: 1000)`,
    },
    'duty-cycle': {
      type: 'string',
      value: '<f>',
      description: 'Largest share of the time spent deleting, above 0 and at most 1 (default: 1)',
    },
  },
  positionals: [],
  graceful: true,
  examples: [
    'effectively-once prune --older-than 14d --consumer orders --dry-run',
    'effectively-once prune --older-than 14d --consumer orders --duty-cycle 0.5',
    'effectively-once prune --family http-keys --older-than 2d --scope acme --dry-run',
  ],
  async run(ctx) {
    const { entry, rows: family, ref, group } = selectFamily('prune', ctx.args, ctx.ref);
    const target = family.target(ref, group);
    const window = stringValue(ctx.args, 'older-than');
    const expired = flag(ctx.args, 'expired');
    if (window === undefined && !expired) {
      throw new ConfigurationError(
        '--older-than',
        'is required (or --expired), e.g. --older-than 7d',
      );
    }
    if (window !== undefined && expired) {
      throw new ConfigurationError('--expired', 'goes without --older-than: give one of them');
    }
    const olderThanMs = window === undefined ? undefined : parseDuration(window, '--older-than');
    const batch = stringValue(ctx.args, 'batch-size');
    const batchSize =
      batch === undefined ? 1000 : parseInteger(batch, '--batch-size', 1, MAX_PRUNE_BATCH);
    const duty = stringValue(ctx.args, 'duty-cycle');
    const dutyCycle = duty === undefined ? 1 : parseFraction(duty, '--duty-cycle');
    const dryRun = flag(ctx.args, 'dry-run');

    const pool = await ctx.pool();
    const clock = await pruneClock(pool, olderThanMs);
    const cutoff = clock.cutoff;
    const whose =
      group === undefined ? `of every ${family.group}` : `of ${family.group} "${group}"`;
    const expiry =
      target.expiresColumn === undefined
        ? ''
        : cutoff === undefined
          ? ` whose own expiry passed by ${clock.now.toISOString()}`
          : ' whose own expiry passed (or that have none)';
    const age =
      cutoff === undefined
        ? ''
        : ` ${family.aged} before ${cutoff.toISOString()} (older than ${window} by the database's clock)`;
    const rows = `rows ${whose} in ${qualifiedTable(ref)}${age}${expiry}`;
    const base = {
      family: entry.family.name,
      schema: ref.schema,
      table: ref.table,
      [family.group]: group ?? null,
      olderThan: window ?? null,
      olderThanMs: olderThanMs ?? null,
      cutoff: cutoff?.toISOString() ?? null,
      now: clock.now.toISOString(),
    };
    if (dryRun) {
      const count = await countPrunable(pool, target, clock);
      return {
        json: { ...base, dryRun: true, wouldDelete: count },
        text: `Dry run: would delete ${formatCount(count)} ${rows}. Nothing was deleted.`,
      };
    }
    const deleted = await pruneTable(pool, target, {
      ...(cutoff !== undefined ? { olderThan: cutoff } : {}),
      batchSize,
      dutyCycle,
      signal: ctx.signal,
    });
    const interrupted = ctx.signal.aborted;
    return {
      json: { ...base, dryRun: false, deleted, interrupted },
      text: interrupted
        ? `Interrupted: deleted ${formatCount(deleted)} ${rows} before stopping; older rows may remain.`
        : `Deleted ${formatCount(deleted)} ${rows}.`,
      exitCode: interrupted ? EXIT.interrupted : EXIT.ok,
    };
  },
};
