import type { OptionSpec } from '../args.js';
import { flag, parseList, stringValue } from '../args.js';
import type { Command } from '../command.js';
import { familyRef, TABLE_FAMILIES } from '../families.js';
import { qualifiedTable, type TableRef } from '../../store/identifiers.js';
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

/** `migrate`: prints or applies the DDL of the library's tables. */
export const migrateCommand: Command = {
  name: 'migrate',
  summary: "Print or apply the DDL of the library's tables",
  usage: '[--print] [--only <families>] [options]',
  description: [
    "Creates what is missing of the library's tables, family by family: idempotent, under the same advisory lock as the library's own migrate functions, and a no-op that takes no table lock when everything exists. Families:",
    TABLE_FAMILIES.map((f) => `  ${f.family.name.padEnd(width)}  ${f.family.summary}`).join('\n'),
    'With --print it prints the same statements instead (no database needed), for deploy pipelines that forbid DDL at start-up; run them with your migration tool and start the consumers with `migrate: false`.',
  ].join('\n\n'),
  options: {
    print: { type: 'boolean', description: 'Print the DDL instead of applying it' },
    only: {
      type: 'string',
      value: '<families>',
      description: `Comma-separated families to handle (default: all: ${names.join(',')})`,
    },
    ...tableOptions,
  },
  positionals: [],
  examples: [
    'effectively-once migrate --print > eo-tables.sql',
    'effectively-once migrate --only consumer --schema billing',
    'DATABASE_URL=postgres://... effectively-once migrate --json',
  ],
  async run(ctx) {
    const only = stringValue(ctx.args, 'only');
    const selected = only === undefined ? names : parseList(only, '--only', names);
    const targets = TABLE_FAMILIES.filter((f) => selected.includes(f.family.name)).map((f) => ({
      ...f,
      ref: familyRef(f, ctx.ref, stringValue(ctx.args, f.tableOption)),
    }));
    // Every name is validated (ddl quotes it) before anything connects.
    const planned = targets.map((t) => ({ ...t, ddl: t.family.ddl(t.ref) }));
    if (flag(ctx.args, 'print')) {
      return {
        json: {
          families: planned.map((t) => ({
            family: t.family.name,
            schema: t.ref.schema,
            table: t.ref.table,
            statements: t.ddl.statements,
          })),
        },
        text: planned
          .map(
            (t) =>
              `-- ${t.family.name}: ${t.family.summary}\n-- ${qualifiedTable(t.ref)}; idempotent\n` +
              t.ddl.statements.map((s) => `${s};\n`).join('\n'),
          )
          .join('\n'),
      };
    }
    const pool = await ctx.pool();
    const results: Array<{ family: string; table: string; ref: TableRef; result: string }> = [];
    for (const t of planned) {
      const result = await t.family.migrate(pool, t.ref);
      results.push({ family: t.family.name, table: qualifiedTable(t.ref), ref: t.ref, result });
    }
    return {
      json: {
        families: results.map((r) => ({
          family: r.family,
          schema: r.ref.schema,
          table: r.ref.table,
          result: r.result,
        })),
      },
      text: formatTable(
        [{ header: 'family' }, { header: 'table' }, { header: 'result' }],
        results.map((r) => [
          r.family,
          r.table,
          r.result === 'created' ? 'created' : 'already present (nothing run)',
        ]),
      ),
    };
  },
};
