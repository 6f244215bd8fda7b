import { createHash } from 'node:crypto';
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

/** Postgres's identifier limit, in bytes: it silently truncates longer names. */
const MAX_IDENTIFIER_BYTES = 63;

/**
 * Quotes an SQL identifier. Names are user configuration, so they are always quoted
 * (embedded quotes doubled) and never interpolated raw; NUL cannot be stored at all.
 */
export function quoteIdentifier(name: string, option = 'identifier'): string {
  if (name.length === 0 || name.includes('\u0000')) {
    throw new ConfigurationError(option, 'must be a non-empty name without NUL characters');
  }
  if (Buffer.byteLength(name, 'utf8') > MAX_IDENTIFIER_BYTES) {
    // Postgres silently truncates longer names, which would make two configs collide.
    throw new ConfigurationError(option, 'must be at most 63 bytes (Postgres identifier limit)');
  }
  return `"${name.replace(/"/g, '""')}"`;
}

/** Hex digits of the hash a truncated derived name ends with (40 bits). */
const HASH_DIGITS = 10;

/**
 * The name of a relation or function derived from a table's: `<table><suffix>` when it
 * fits Postgres's 63 bytes. Longer, it is `<table cut>_<hash><suffix>`, the hash over the full `<table><suffix>`:
 * cutting alone gave two tables sharing a long prefix one function or index between
 * them (one replaced the other's, or the second table silently got none). Cut on a
 * character boundary, deterministic for one table name.
 */
export function derivedName(table: string, suffix: string): string {
  const full = table + suffix;
  if (Buffer.byteLength(full, 'utf8') <= MAX_IDENTIFIER_BYTES) return full;
  const tail = `_${createHash('sha256').update(full, 'utf8').digest('hex').slice(0, HASH_DIGITS)}${suffix}`;
  const room = MAX_IDENTIFIER_BYTES - Buffer.byteLength(tail, 'utf8');
  let base = '';
  for (const char of table) {
    if (Buffer.byteLength(base + char, 'utf8') > room) break;
    base += char;
  }
  return base + tail;
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
