import { createHash } from 'node:crypto';
import { MigrationChecksumError } from '../errors.js';
import { qualifiedTable, quoteIdentifier, type TableRef } from './identifiers.js';
import { sqlLiteral } from './literals.js';
import type { MigrationStep, TableFamily } from './table-family.js';

// The migration ledger: one row per step applied to one table, in a table of the
// table's own schema (so a schema holds its tables and their history, and whoever may
// create tables there may record their steps). Its own shape is fixed: every version
// of the library reads it, so it can never change incompatibly.

/** Name of the ledger table, in each schema that holds the library's tables. */
export const LEDGER_TABLE = 'effectively_once_migrations';

/** The ledger of `schema`. */
export function ledgerRef(schema: string): TableRef {
  return { schema, table: LEDGER_TABLE };
}

/**
 * Creates the ledger (and the schema, unless `schemaExists`). Idempotent: the one
 * shape the ledger has, so `IF NOT EXISTS` cannot adopt a different one.
 */
export function ledgerStatements(schema: string, schemaExists = false): string[] {
  return [
    ...(schemaExists ? [] : [`CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(schema, 'schema')}`]),
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(ledgerRef(schema))} (
  family     text        NOT NULL,
  table_name text        NOT NULL,
  version    integer     NOT NULL,
  checksum   text        NOT NULL,
  summary    text        NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (family, table_name, version)
)`,
  ];
}

/**
 * The step's checksum: SHA-256 over its statements as rendered for its table. A
 * recorded step whose checksum differs was applied from other statements (a step edited
 * after its release, or DDL run by hand under its version): never re-run, refused.
 */
export function stepChecksum(step: MigrationStep): string {
  const hash = createHash('sha256');
  for (const statement of step.statements) hash.update(statement, 'utf8').update('\0');
  return hash.digest('hex');
}

/** The statement that records `step` as applied to `ref`, run in the step's transaction. */
export function recordStatement(family: TableFamily, ref: TableRef, step: MigrationStep): string {
  return (
    `INSERT INTO ${qualifiedTable(ledgerRef(ref.schema))} (family, table_name, version, checksum, summary)` +
    ` VALUES (${sqlLiteral(family.name)}, ${sqlLiteral(ref.table)}, ${step.version},` +
    ` ${sqlLiteral(stepChecksum(step))}, ${sqlLiteral(step.summary)})`
  );
}

/** A step the ledger records as applied. */
export interface AppliedStep {
  version: number;
  checksum: string;
}

/** The ledger's rows of one table, oldest first (`$1` family, `$2` table). */
export function readLedgerSql(schema: string): string {
  return `SELECT version, checksum FROM ${qualifiedTable(ledgerRef(schema))} WHERE family = $1 AND table_name = $2 ORDER BY version`;
}

/** Where one table of a family stands against this version's steps. */
export interface MigrationPlan {
  family: TableFamily;
  ref: TableRef;
  /** Every step this version knows, version 1 first. */
  steps: MigrationStep[];
  /** The steps not applied yet, in the order they apply. */
  pending: MigrationStep[];
  /** The highest version the ledger records (0: none). */
  version: number;
  /**
   * Versions recorded that this version does not know: a newer version of the library
   * migrated the table (and was then rolled back, or runs beside this one). Accepted:
   * steps are forward compatible, and every step this version knows is applied.
   */
  unknown: number[];
}

/**
 * Compares the ledger's rows with the family's steps for `ref`. Throws
 * {@link MigrationChecksumError} when a recorded step's checksum is not this version's.
 */
export function planMigrations(
  family: TableFamily,
  ref: TableRef,
  applied: readonly AppliedStep[],
): MigrationPlan {
  const steps = family.steps(ref);
  steps.forEach((step, i) => {
    // The family's own contract; a broken one is a bug here, not a user's database.
    if (step.version !== i + 1)
      throw new Error(`${family.name}: step ${i + 1} has version ${step.version}`);
  });
  const recorded = new Map(applied.map((row) => [row.version, row.checksum]));
  for (const step of steps) {
    const checksum = recorded.get(step.version);
    const expected = stepChecksum(step);
    if (checksum !== undefined && checksum !== expected)
      throw new MigrationChecksumError({
        family: family.name,
        schema: ref.schema,
        table: ref.table,
        version: step.version,
        recorded: checksum,
        expected,
      });
  }
  return {
    family,
    ref,
    steps,
    pending: steps.filter((step) => !recorded.has(step.version)),
    version: Math.max(0, ...recorded.keys()),
    unknown: [...recorded.keys()].filter((v) => v > steps.length).sort((a, b) => a - b),
  };
}

/**
 * Forgets the table's ledger rows, run before step 1: the table is new (nothing to
 * forget), or it was dropped and the rows describe a table that no longer exists.
 */
export function forgetStatement(family: TableFamily, ref: TableRef): string {
  return (
    `DELETE FROM ${qualifiedTable(ledgerRef(ref.schema))}` +
    ` WHERE family = ${sqlLiteral(family.name)} AND table_name = ${sqlLiteral(ref.table)}`
  );
}

/** What runs for `step`, in one transaction: its statements and its ledger row. */
export function stepScript(family: TableFamily, ref: TableRef, step: MigrationStep): string[] {
  return [
    ...(step.version === 1 ? [forgetStatement(family, ref)] : []),
    ...step.statements,
    recordStatement(family, ref, step),
  ];
}
