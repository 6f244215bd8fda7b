import type { Pool } from 'pg';
import {
  DEFAULT_TABLE,
  derivedName,
  qualifiedTable,
  quoteIdentifier,
  tableRef,
  type TableRef,
} from './identifiers.js';
import { applyMigrations } from './migrator.js';
import type { TableFamily } from './table-family.js';

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Schema holding the dedup table; created if missing. Default `public`. */
  schema?: string;
  /** Dedup table name. Default `processed_messages`. */
  table?: string;
}

/** One key table of the library (dedup, HTTP keys): its columns and the timestamp pruning ages rows by. */
export interface KeyTableSpec {
  ref: TableRef;
  /** The column list of `CREATE TABLE`, primary key and {@link EXPIRES_COLUMN} included. */
  columns: string;
  /** The timestamp column a window prunes by; indexed as `<table>_<column>_idx`. */
  timeColumn: string;
}

/** The column holding a row's own expiry (see {@link keyTableStatements}). */
export const EXPIRES_COLUMN = 'expires_at';

/**
 * The index predicate of the expiry index: rows that expire. Not `infinity` (a writer
 * without retention) nor NULL (lifetime unknown: a row the claim did not write): those
 * are only ever pruned by a window, through the time index, and every claim of a
 * consumer without retention would pay an entry here for nothing. Queries that use the
 * index repeat the predicate.
 */
export const EXPIRY_INDEXED = {
  expiring: `${quoteIdentifier(EXPIRES_COLUMN)} < 'infinity'`,
};

/**
 * Version 1 of a key table: the table, the timestamp index a window prunes by, and the
 * partial index over the rows that expire, which pruning by expiry scans. `IF NOT
 * EXISTS`, so a table this same version made before the ledger existed is adopted (its
 * step recorded, nothing changed); later steps need no such guard.
 */
export function keyTableStatements(spec: KeyTableSpec): string[] {
  const table = qualifiedTable(spec.ref);
  const index = (column: string): string =>
    quoteIdentifier(derivedName(spec.ref.table, `_${column}_idx`), 'table');
  const expires = quoteIdentifier(EXPIRES_COLUMN);
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (\n${spec.columns}\n)`,
    `CREATE INDEX IF NOT EXISTS ${index(spec.timeColumn)} ON ${table} (${quoteIdentifier(spec.timeColumn)})`,
    `CREATE INDEX IF NOT EXISTS ${index(EXPIRES_COLUMN)} ON ${table} (${expires}) WHERE ${EXPIRY_INDEXED.expiring}`,
  ];
}

// `expires_at`: the row's own expiry, written by the claim from the consumer's retention
// (`infinity` without one; NULL: lifetime unknown, pruned only by a window).
const DEDUP_COLUMNS = `  consumer     text        NOT NULL,
  message_key  text        NOT NULL,
  payload_hash bytea,
  processed_at timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz,
  PRIMARY KEY (consumer, message_key)`;

/** The consumers' dedup table (`processed_messages`), as a {@link TableFamily}. */
export const dedupTables: TableFamily = {
  name: 'consumer',
  summary: "the consumers' dedup table (one row per processed key)",
  defaultTable: DEFAULT_TABLE,
  steps: (ref) => [
    {
      version: 1,
      summary: 'the dedup table, its processed_at and expiry indexes',
      statements: keyTableStatements({ ref, columns: DEDUP_COLUMNS, timeColumn: 'processed_at' }),
    },
  ],
};

/**
 * Brings the dedup table up to this version: creates it, or applies the migration
 * steps it lacks, recording each in the schema's `effectively_once_migrations` ledger.
 * Idempotent, and safe when many workers start at once; when nothing is pending it only
 * reads the ledger (and so takes no table lock beside a busy fleet).
 */
export async function migrate(pool: Pool, options: MigrateOptions = {}): Promise<void> {
  await applyMigrations(pool, dedupTables, tableRef(options));
}
