import type { TableRef } from './identifiers.js';

/**
 * One versioned change to a family's relations under one configured name, applied at
 * most once per table and recorded in the migration ledger (see `ledger.ts`) with a
 * checksum of its statements. A step, once released, is never edited (its checksum is
 * checked at every start): a change is a new step with the next version.
 */
export interface MigrationStep {
  /** 1, 2, 3...: the order steps apply in, with no gaps. */
  readonly version: number;
  /** What the step does, for `migrate --print` and the ledger. */
  readonly summary: string;
  /** The statements, run in order in one transaction with the step's ledger row. */
  readonly statements: readonly string[];
}

/**
 * A kind of table the library owns (the consumers' dedup table, Kafka stored offsets,
 * ...). Its steps have one owner, `steps`, used both to migrate and to print them (the
 * CLI's `migrate --print`), so what a deploy pipeline runs is what the library would run.
 *
 * Steps after the first must be forward compatible (add, never drop or retype what an
 * earlier version reads): the instances of the version before keep running beside the
 * new ones during a rolling deploy, and after a rollback against a database migrated
 * by the newer version.
 */
export interface TableFamily {
  /** Stable name, as `migrate --only` takes it and the ledger records it: `consumer`, `kafka-offsets`. */
  readonly name: string;
  /** What the table holds, for help and output. */
  readonly summary: string;
  /** Table name unless configured otherwise. */
  readonly defaultTable: string;
  /** The family's steps for the table `ref`, version 1 first. Validates (quotes) the names. */
  steps(ref: TableRef): MigrationStep[];
}
