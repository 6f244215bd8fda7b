import type { OptionSpec } from '../args.js';
import { flag, parseList, stringValue } from '../args.js';
import type { Command } from '../command.js';
import { familyRef, TABLE_FAMILIES } from '../families.js';
import { ConfigurationError } from '../../errors.js';
import { qualifiedTable } from '../../store/identifiers.js';
import {
  ledgerStatements,
  planMigrations,
  stepChecksum,
  stepScript,
  type MigrationPlan,
} from '../../store/ledger.js';
import { applyMigrations, readPlan, type MigrationOutcome } from '../../store/migrator.js';
import { formatTable } from '../output.js';

const names = TABLE_FAMILIES.map((f) => f.family.name);
const width = Math.max(...names.map((n) => n.length));

/** Flags naming the tables of families other than the dedup table (which is `--table`). */
const tableOptions: Record<string, OptionSpec> = Object.fromEntries(
  TABLE_FAMILIES.filter((f) => f.tableOption !== 'table').map((f) => [
    f.tableOption,
    {
      type: 'string',
      value: '<name>',
      description: `${f.family.name} table (default: ${f.family.defaultTable})`,
    } satisfies OptionSpec,
  ]),
);

/** `migrate`: prints or applies the pending migration steps of the library's tables. */
export const migrateCommand: Command = {
  name: 'migrate',
  summary: "Print or apply the pending migration steps of the library's tables",
  usage: '[--print [--all]] [--only <families>] [options]',
  description: [
    "Applies the migration steps each of the library's tables lacks, family by family, in order, each in a transaction of its own with its row in the schema's ledger (effectively_once_migrations): the same code, lock and ledger as the doors' own migration at start. A table whose steps are all applied is left alone (only the ledger is read). Families:",
    TABLE_FAMILIES.map((f) => `  ${f.family.name.padEnd(width)}  ${f.family.summary}`).join('\n'),
    "With --print it prints the pending steps' SQL instead, ledger rows included, for deploy pipelines that forbid DDL at start-up: run each step in one transaction with your migration tool and start the doors with `migrate: false` (they refuse to start while a step is pending). --print reads the database's ledger; --print --all prints every step without a database (what a fresh database needs).",
  ].join('\n\n'),
  options: {
    print: { type: 'boolean', description: 'Print the pending steps instead of applying them' },
    all: {
      type: 'boolean',
      description: 'With --print: every step, as for a fresh database (no database needed)',
    },
    only: {
      type: 'string',
      value: '<families>',
      description: `Comma-separated families to handle (default: all: ${names.join(',')})`,
    },
    ...tableOptions,
  },
  positionals: [],
  examples: [
    'effectively-once migrate --print > eo-pending.sql',
    'effectively-once migrate --print --all --schema billing > eo-tables.sql',
    'effectively-once migrate --only consumer --schema billing',
    'DATABASE_URL=postgres://... effectively-once migrate --json',
  ],
  async run(ctx) {
    const only = stringValue(ctx.args, 'only');
    const selected = only === undefined ? names : parseList(only, '--only', names);
    const targets = TABLE_FAMILIES.filter((f) => selected.includes(f.family.name)).map((f) => ({
      family: f.family,
      ref: familyRef(f, ctx.ref, stringValue(ctx.args, f.tableOption)),
    }));
    // Every name is validated (the steps quote them) before anything connects.
    for (const t of targets) t.family.steps(t.ref);
    const print = flag(ctx.args, 'print');
    if (flag(ctx.args, 'all')) {
      if (!print) throw new ConfigurationError('--all', 'goes with --print');
      return printed(targets.map((t) => planMigrations(t.family, t.ref, [])));
    }
    if (print) {
      const pool = await ctx.pool().catch((error: unknown) => {
        if (!(error instanceof ConfigurationError)) throw error;
        throw new ConfigurationError(
          '--database-url',
          "is missing: --print reads the database's migration ledger; pass --database-url or set DATABASE_URL, or add --all for every step (a fresh database)",
        );
      });
      const plans: MigrationPlan[] = [];
      for (const t of targets) plans.push(await readPlan(pool, t.family, t.ref));
      return printed(plans);
    }
    const pool = await ctx.pool();
    const results: Array<{ t: (typeof targets)[number]; outcome: MigrationOutcome }> = [];
    for (const t of targets)
      results.push({ t, outcome: await applyMigrations(pool, t.family, t.ref) });
    return {
      json: {
        families: results.map(({ t, outcome }) => ({
          family: t.family.name,
          schema: t.ref.schema,
          table: t.ref.table,
          ...outcome,
        })),
      },
      text: formatTable(
        [{ header: 'family' }, { header: 'table' }, { header: 'result' }],
        results.map(({ t, outcome }) => [
          t.family.name,
          qualifiedTable(t.ref),
          describeOutcome(outcome, t.family.steps(t.ref).length),
        ]),
      ),
    };
  },
};

/** `applied 1, 2`, or `up to date (version 1)`; a ledger ahead of this version says so. */
function describeOutcome(outcome: MigrationOutcome, known: number): string {
  const result =
    outcome.applied.length > 0
      ? `applied ${outcome.applied.join(', ')}`
      : `up to date (version ${outcome.version})`;
  return outcome.unknown.length > 0
    ? `${result}; the ledger records ${outcome.unknown.join(', ')}, newer than this version's ${known}`
    : result;
}

/** The pending steps' SQL: each schema's ledger first, then each step with its ledger row. */
function printed(plans: MigrationPlan[]): { json: unknown; text: string } {
  const schemas = [...new Set(plans.filter((p) => p.pending.length > 0).map((p) => p.ref.schema))];
  const ledgers = schemas.map((schema) => ({ schema, statements: ledgerStatements(schema) }));
  const count = plans.reduce((n, p) => n + p.pending.length, 0);
  const sql = (statements: string[]): string => statements.map((s) => `${s};\n`).join('\n');
  const sections = [
    count === 0
      ? "-- Nothing pending: every table has all of this version's migration steps.\n"
      : `-- ${count} pending migration step${count === 1 ? '' : 's'}. Run each section in one transaction (psql --single-transaction, or your migration tool's).\n`,
    ...ledgers.map(
      (l) =>
        `-- The migration ledger of schema ${JSON.stringify(l.schema)} (idempotent)\n${sql(l.statements)}`,
    ),
    ...plans.flatMap((p) =>
      p.pending.map(
        (step) =>
          `-- ${p.family.name} ${qualifiedTable(p.ref)}, step ${step.version}: ${step.summary}\n` +
          sql(stepScript(p.family, p.ref, step)),
      ),
    ),
  ];
  return {
    json: {
      ledgers,
      families: plans.map((p) => ({
        family: p.family.name,
        schema: p.ref.schema,
        table: p.ref.table,
        version: p.version,
        unknown: p.unknown,
        pending: p.pending.map((step) => ({
          version: step.version,
          summary: step.summary,
          checksum: stepChecksum(step),
          statements: stepScript(p.family, p.ref, step),
        })),
      })),
    },
    text: sections.join('\n').trimEnd(),
  };
}
