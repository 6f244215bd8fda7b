import type { Pool } from 'pg';
import {
  DEFAULT_TABLE,
  derivedName,
  qualifiedTable,
  quoteIdentifier,
  tableRef,
  type TableRef,
} from './identifiers.js';
import { applyDdl, type Ddl, type TableFamily } from './table-family.js';

/** Options of {@link migrate}. */
export interface MigrateOptions {
  /** Schema holding the dedup table; created if missing. Default `public`. */
  schema?: string;
  /** Dedup table name. Default `processed_messages`. */
  table?: string;
}

/** One table of the library's family: its columns and the timestamp index pruning uses. */
export interface TableSpec {
  ref: TableRef;
  /** The column list of `CREATE TABLE`, primary key included. */
  columns: string;
  /** The timestamp column the window is pruned by; indexed as `<table>_<column>_idx`. */
  timeColumn: string;
}

/** Advisory lock every table family migrates under. Arbitrary but fixed: every worker of every version must take the same lock. */
export const MIGRATION_LOCK_KEY = 0x6566_6f6e; // "efon"

/**
 * The DDL of one table of the family: its schema, the table, and the timestamp index
 * its window is pruned by. The one copy, for migrating and for printing.
 */
export function tableDdl(spec: TableSpec): Ddl {
  const table = qualifiedTable(spec.ref);
  const schema = quoteIdentifier(spec.ref.schema, 'schema');
  const index = quoteIdentifier(derivedName(spec.ref.table, `_${spec.timeColumn}_idx`), 'table');
  return {
    statements: [
      `CREATE SCHEMA IF NOT EXISTS ${schema}`,
      `CREATE TABLE IF NOT EXISTS ${table} (\n${spec.columns}\n)`,
      `CREATE INDEX IF NOT EXISTS ${index} ON ${table} (${quoteIdentifier(spec.timeColumn)})`,
    ],
    relations: [table, `${schema}.${index}`],
  };
}

/** The column holding a row's own expiry (see {@link expiryDdl}). */
export const EXPIRES_COLUMN = 'expires_at';

/**
 * The index predicate of {@link expiryDdl}: rows that expire. Not `infinity` (a writer
 * without retention) nor NULL (written before the column, lifetime unknown): those are
 * only ever pruned by a window, through the time index, and every claim of a consumer
 * without retention, or of an instance of the earlier version, would pay an entry here
 * for nothing. Queries that use the index repeat the predicate.
 */
export const EXPIRY_INDEXED = {
  expiring: `${quoteIdentifier(EXPIRES_COLUMN)} < 'infinity'`,
};

/**
 * The row's own expiry, for a table created before it: the column (nullable, no
 * default, so adding it rewrites nothing and old versions' inserts leave it NULL) and a
 * partial index over the rows that expire, which pruning by expiry scans. Both idempotent; a table created by this version already has the column, and
 * the ALTER does nothing.
 */
export function expiryDdl(ref: TableRef): Ddl {
  const table = qualifiedTable(ref);
  const index = quoteIdentifier(derivedName(ref.table, `_${EXPIRES_COLUMN}_idx`), 'table');
  const column = quoteIdentifier(EXPIRES_COLUMN);
  return {
    statements: [
      `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${column} timestamptz`,
      `CREATE INDEX IF NOT EXISTS ${index} ON ${table} (${column}) WHERE ${EXPIRY_INDEXED.expiring}`,
    ],
    relations: [`${quoteIdentifier(ref.schema, 'schema')}.${index}`],
  };
}

/**
 * A {@link TableFamily} from its DDL: `migrate` applies that same DDL under the advisory
 * lock every family shares (see `applyDdl`), so what `migrate --print` shows is what
 * runs.
 */
export function ddlTableFamily(def: Omit<TableFamily, 'migrate'>): TableFamily {
  return {
    ...def,
    migrate: (pool, ref, signal) =>
      applyDdl(pool, def.ddl(ref), {
        lockKey: MIGRATION_LOCK_KEY,
        operation: 'migrate',
        ref,
        signal,
      }),
  };
}

// `expires_at`: the row's own expiry, written by the claim from the consumer's retention
// (`infinity` without one; NULL: written before the column, lifetime unknown). See expiryDdl.
const DEDUP_COLUMNS = `  consumer     text        NOT NULL,
  message_key  text        NOT NULL,
  payload_hash bytea,
  processed_at timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz,
  PRIMARY KEY (consumer, message_key)`;

/** A table's DDL followed by its expiry column and index (see {@link expiryDdl}). */
export function withExpiry(ref: TableRef, ddl: Ddl): Ddl {
  const expiry = expiryDdl(ref);
  return {
    ...ddl,
    statements: [...ddl.statements, ...expiry.statements],
    relations: [...ddl.relations, ...expiry.relations],
  };
}

/** The consumers' dedup table (`processed_messages`), as a {@link TableFamily}. */
export const dedupTables: TableFamily = ddlTableFamily({
  name: 'consumer',
  summary: "the consumers' dedup table (one row per processed key)",
  defaultTable: DEFAULT_TABLE,
  ddl: (ref) =>
    withExpiry(ref, tableDdl({ ref, columns: DEDUP_COLUMNS, timeColumn: 'processed_at' })),
});

/**
 * Creates the dedup table and its pruning index if they do not exist. Idempotent,
 * and safe when many workers start at once: the DDL runs under a transaction-scoped
 * advisory lock, and not at all when both exist (so it takes no table lock beside a
 * busy fleet).
 */
export async function migrate(pool: Pool, options: MigrateOptions = {}): Promise<void> {
  await dedupTables.migrate(pool, tableRef(options));
}
