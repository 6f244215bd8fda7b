import type { Pool } from 'pg';
import { DatabaseError } from '../errors.js';
import { qualifiedTable, quoteIdentifier, tableRef, type TableRef } from './identifiers.js';

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

// Arbitrary but fixed: every worker of every version must take the same lock.
const MIGRATION_LOCK_KEY = 0x6566_6f6e; // "efon"

/**
 * Creates the dedup table and its pruning index if they do not exist. Idempotent,
 * and safe when many workers start at once (see `ensureTable`).
 */
export async function migrate(pool: Pool, options: MigrateOptions = {}): Promise<void> {
  await ensureTable(pool, {
    ref: tableRef(options),
    columns: `
        consumer     text        NOT NULL,
        message_key  text        NOT NULL,
        payload_hash bytea,
        processed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (consumer, message_key)`,
    timeColumn: 'processed_at',
  });
}

/**
 * Creates one table of the family (and its schema and pruning index) if missing.
 * Concurrent `CREATE ... IF NOT EXISTS` can still collide on the catalog, so the DDL
 * runs under a transaction-scoped advisory lock shared by every table of the family.
 */
export async function ensureTable(pool: Pool, spec: TableSpec): Promise<void> {
  const { ref } = spec;
  const table = qualifiedTable(ref);
  const schema = quoteIdentifier(ref.schema, 'schema');
  const index = quoteIdentifier(indexName(ref.table, spec.timeColumn), 'table');
  const client = await pool.connect().catch((cause: unknown) => {
    throw new DatabaseError('connect (migrate)', cause);
  });
  try {
    // CREATE INDEX IF NOT EXISTS takes a table lock even when the index exists, and
    // would queue behind every open claim (a long handler), stalling claims queued
    // behind it: a worker starting next to a busy fleet must not touch the DDL at all.
    const existing = await client.query<{ ready: boolean }>(
      'SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AS ready',
      [table, `${schema}.${index}`],
    );
    if (existing.rows[0]?.ready === true) return;
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${table} (${spec.columns})`);
    await client.query(
      `CREATE INDEX IF NOT EXISTS ${index} ON ${table} (${quoteIdentifier(spec.timeColumn)})`,
    );
    await client.query('COMMIT');
  } catch (cause) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw new DatabaseError('migrate', cause, { schema: ref.schema, table: ref.table });
  } finally {
    client.release();
  }
}

function indexName(table: string, column: string): string {
  const suffix = `_${column}_idx`;
  // Keep within 63 bytes while staying deterministic for one table name.
  let base = table;
  while (Buffer.byteLength(base + suffix, 'utf8') > 63) base = base.slice(0, -1);
  return base + suffix;
}
