import { ConfigurationError } from '../errors.js';
import { idempotencyKeyTables, keyPruneTarget } from '../http/store.js';
import { outboxTables } from '../outbox/table.js';
import { flowPruneTarget, flowTables } from '../steps/table.js';
import { quoteIdentifier, type TableRef } from '../store/identifiers.js';
import { kafkaOffsetsTables } from '../store/kafka-offsets.js';
import { dedupTables } from '../store/migrate.js';
import { dedupPruneTarget, type PruneTarget } from '../store/prune.js';
import type { TableFamily } from '../store/table-family.js';
import { stringValue, type OptionSpec, type ParsedArgs } from './args.js';

/**
 * How `stats`, `prune` and `inspect` read a family's rows: one row per claimed key,
 * grouped by the primary key's first column, aged by a timestamp.
 */
export interface FamilyRows {
  /** The grouping column, which is also the flag that picks one group: `consumer`, `scope`. */
  group: 'consumer' | 'scope';
  /** Plural of `group`, for output: `consumers`, `scopes`. */
  groups: string;
  /** What the time column records, for output: rows `processed` / `created` before a cutoff. */
  aged: 'processed' | 'created' | 'finished';
  /** The rows a prune deletes, every group's or `group`'s: the one description of them. */
  target(ref: TableRef, group: string | undefined): PruneTarget;
  /** The row `inspect --probe` tries to insert (and rolls back): key, group, required columns. */
  probeRow(group: string, key: string): Record<string, unknown>;
}

/** A table family as the CLI knows it: the family and the flag that names its table. */
export interface RegisteredFamily {
  family: TableFamily;
  /** Option naming the table; `table` is the common `--table` (the dedup table). */
  tableOption: string;
  /** Set for the families `stats`, `prune` and `inspect` read. */
  rows?: FamilyRows;
}

/** The dedup table: keys of each consumer. */
const consumerRows: FamilyRows = {
  group: 'consumer',
  groups: 'consumers',
  aged: 'processed',
  target: dedupPruneTarget,
  probeRow: (consumer, key) => ({ consumer, message_key: key }),
};

/** The HTTP key table: keys of each scope (tenant), the rows `Idempotency.prune` deletes. */
const httpKeyRows: FamilyRows = {
  group: 'scope',
  groups: 'scopes',
  aged: 'created',
  target: keyPruneTarget,
  // Method, route and fingerprint are NOT NULL; the row never commits.
  probeRow: (scope, key) => ({
    scope,
    idempotency_key: key,
    method: '',
    route: '',
    fingerprint: Buffer.alloc(0),
  }),
};

/** The steps flows table: flows of each scope; a prune deletes finished ones only. */
const flowRows: FamilyRows = {
  group: 'scope',
  groups: 'scopes',
  aged: 'finished',
  target: flowPruneTarget,
  probeRow: (scope, key) => ({
    scope,
    flow_key: key,
    flow: '',
    origin: '',
    fingerprint: Buffer.alloc(0),
  }),
};

/**
 * Every table family `migrate` handles, in the order it migrates them. A new family
 * (a module exporting a `TableFamily` that owns its steps) registers here with the flag
 * that names its table; `migrate`, `--only` and the help pick it up, and with `rows`
 * so do `stats`, `prune` and `inspect` (`--family`).
 */
export const TABLE_FAMILIES: readonly RegisteredFamily[] = [
  { family: dedupTables, tableOption: 'table', rows: consumerRows },
  { family: kafkaOffsetsTables, tableOption: 'kafka-offsets-table' },
  { family: idempotencyKeyTables, tableOption: 'http-keys-table', rows: httpKeyRows },
  { family: outboxTables, tableOption: 'outbox-table' },
  { family: flowTables, tableOption: 'flows-table', rows: flowRows },
];

/** The table of family `f`: `--table`'s ref for the dedup table, else its own flag's name. */
export function familyRef(
  f: RegisteredFamily,
  dedup: TableRef,
  table: string | undefined,
): TableRef {
  if (f.tableOption === 'table') return dedup;
  if (table !== undefined) quoteIdentifier(table, `--${f.tableOption}`);
  return { schema: dedup.schema, table: table ?? f.family.defaultTable };
}

type RowFamily = RegisteredFamily & { rows: FamilyRows };

const ROW_FAMILIES = TABLE_FAMILIES.filter((f): f is RowFamily => f.rows !== undefined);

/** `--family` and the table flags of the families it can pick (the dedup table's is `--table`). */
export const FAMILY_OPTIONS: Record<string, OptionSpec> = {
  family: {
    type: 'string',
    value: '<name>',
    description: `Which table: ${ROW_FAMILIES.map((f) => f.family.name).join(' or ')} (default: consumer, the dedup table)`,
  },
  ...Object.fromEntries(
    ROW_FAMILIES.filter((f) => f.tableOption !== 'table').map((f) => [
      f.tableOption,
      {
        type: 'string',
        value: '<name>',
        description: `With --family ${f.family.name}: its table (default: ${f.family.defaultTable})`,
      } satisfies OptionSpec,
    ]),
  ),
};

/** The family a command reads, its table, and the group (consumer, scope) it is limited to. */
export interface SelectedFamily {
  entry: RegisteredFamily;
  rows: FamilyRows;
  ref: TableRef;
  /** `--consumer` / `--scope`, whichever is the family's. */
  group: string | undefined;
}

/**
 * Reads `--family` (default: the dedup table) and checks that every table flag and
 * group flag given belongs to it: `--scope` on the dedup table, or `--table` with
 * `--family http-keys`, would silently read the wrong table or every group.
 */
export function selectFamily(command: string, args: ParsedArgs, dedup: TableRef): SelectedFamily {
  const name = stringValue(args, 'family') ?? 'consumer';
  const entry = ROW_FAMILIES.find((f) => f.family.name === name);
  if (entry === undefined) {
    const others = TABLE_FAMILIES.some((f) => f.family.name === name)
      ? `; ${command} does not read the ${name} table${name === 'outbox' ? ' (see `effectively-once outbox`)' : ''}`
      : '';
    throw new ConfigurationError(
      '--family',
      `"${name}" is not one of ${ROW_FAMILIES.map((f) => f.family.name).join(', ')}${others}`,
    );
  }
  for (const other of ROW_FAMILIES) {
    if (other === entry) continue;
    if (stringValue(args, other.tableOption) !== undefined)
      throw new ConfigurationError(
        `--${other.tableOption}`,
        `names the ${other.family.name} table; ${other.tableOption === 'table' ? '' : `add --family ${other.family.name}, or `}use --${entry.tableOption} for the ${entry.family.name} table`,
      );
    if (other.rows.group !== entry.rows.group && stringValue(args, other.rows.group) !== undefined)
      throw new ConfigurationError(
        `--${other.rows.group}`,
        `is for --family ${other.family.name}; the ${entry.family.name} table's rows belong to a ${entry.rows.group} (--${entry.rows.group})`,
      );
  }
  return {
    entry,
    rows: entry.rows,
    ref: familyRef(entry, dedup, stringValue(args, entry.tableOption)),
    group: stringValue(args, entry.rows.group),
  };
}
