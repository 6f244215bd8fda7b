import { ConfigurationError } from '../errors.js';

/** Where the dedup table lives. */
export interface TableRef {
  schema: string;
  table: string;
}

/** Schema of the dedup table unless `schema` says otherwise. */
export const DEFAULT_SCHEMA = 'public';
/** Name of the dedup table unless `table` says otherwise. */
export const DEFAULT_TABLE = 'processed_messages';

/**
 * Quotes an SQL identifier. Names are user configuration, so they are always quoted
 * (embedded quotes doubled) and never interpolated raw; NUL cannot be stored at all.
 */
export function quoteIdentifier(name: string, option = 'identifier'): string {
  if (name.length === 0 || name.includes('\u0000')) {
    throw new ConfigurationError(option, 'must be a non-empty name without NUL characters');
  }
  if (Buffer.byteLength(name, 'utf8') > 63) {
    // Postgres silently truncates longer names, which would make two configs collide.
    throw new ConfigurationError(option, 'must be at most 63 bytes (Postgres identifier limit)');
  }
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * The name of a relation or function derived from a table's (`<table><suffix>`), cut
 * to Postgres's 63 bytes, deterministically for one table name.
 */
export function derivedName(table: string, suffix: string): string {
  let base = table;
  while (Buffer.byteLength(base + suffix, 'utf8') > 63) base = base.slice(0, -1);
  return base + suffix;
}

/** `"schema"."<table><suffix>"`: a relation or function named after `ref`'s table ({@link derivedName}). */
export function qualifiedDerived(ref: TableRef, suffix: string): string {
  return `${quoteIdentifier(ref.schema, 'schema')}.${quoteIdentifier(derivedName(ref.table, suffix), 'table')}`;
}

/** `"schema"."table"`, validated. */
export function qualifiedTable(ref: TableRef): string {
  return `${quoteIdentifier(ref.schema, 'schema')}.${quoteIdentifier(ref.table, 'table')}`;
}

/** Fills in defaults for an optional `{ schema, table }`. */
export function tableRef(
  options: { schema?: string | undefined; table?: string | undefined } = {},
): TableRef {
  return { schema: options.schema ?? DEFAULT_SCHEMA, table: options.table ?? DEFAULT_TABLE };
}
