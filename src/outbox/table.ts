import type { Pool } from 'pg';
import { qualifiedDerived, qualifiedTable, tableRef, type TableRef } from '../store/identifiers.js';
import { applyMigrations } from '../store/migrator.js';
import { pruneTable } from '../store/prune.js';
import type { TableFamily } from '../store/table-family.js';

/** Name of the outbox table unless `table` says otherwise. */
export const DEFAULT_OUTBOX_TABLE = 'eo_outbox';

/** Where the outbox table lives. Both default: `public.eo_outbox`. */
export interface OutboxTableOptions {
  /** Schema of the outbox table. Default `public`. */
  schema?: string;
  /** Name of the outbox table. Default `eo_outbox`. */
  table?: string;
}

/** The outbox table's place, defaults filled in. */
export function outboxRef(options: OutboxTableOptions = {}): TableRef {
  return tableRef({ schema: options.schema, table: options.table ?? DEFAULT_OUTBOX_TABLE });
}

// `seq` orders a key's rows: assigned at INSERT, so two transactions that commit one
// after the other get increasing numbers even on hosts whose clocks (and so UUIDv7s)
// disagree. `lease_token` is the fencing token: drawn from one sequence per claim, it
// only grows, and every mark checks it, so a relay whose lease was taken over cannot
// mark the row it lost.
const COLUMNS = `  id            uuid        PRIMARY KEY,
  seq           bigint      GENERATED ALWAYS AS IDENTITY,
  destination   text        NOT NULL,
  ordering_key  text,
  payload       bytea       NOT NULL,
  content_type  text        NOT NULL,
  headers       jsonb       NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  available_at  timestamptz NOT NULL DEFAULT now(),
  attempts      integer     NOT NULL DEFAULT 0,
  last_error    text,
  state         text        NOT NULL DEFAULT 'pending'
                            CHECK (state IN ('pending', 'published', 'parked')),
  lease_owner   text,
  lease_token   bigint,
  lease_until   timestamptz,
  published_at  timestamptz`;

/** Names of the relations of one outbox table besides the table itself. */
export function outboxRelations(ref: TableRef): {
  table: string;
  sequence: string;
  dueIndex: string;
  keyIndex: string;
  publishedIndex: string;
} {
  const name = (suffix: string): string => qualifiedDerived(ref, suffix);
  return {
    table: qualifiedTable(ref),
    sequence: name('_lease_seq'),
    dueIndex: name('_due_idx'),
    keyIndex: name('_key_idx'),
    publishedIndex: name('_published_at_idx'),
  };
}

/**
 * Version 1 of an outbox table: the table, its lease sequence and indexes. `IF NOT
 * EXISTS`, so a table this same version made before the ledger existed is adopted.
 */
function outboxVersion1(ref: TableRef): string[] {
  const r = outboxRelations(ref);
  const bare = (qualified: string): string => qualified.slice(qualified.indexOf('.') + 1);
  return [
    `CREATE TABLE IF NOT EXISTS ${r.table} (\n${COLUMNS}\n)`,
    `CREATE SEQUENCE IF NOT EXISTS ${r.sequence}`,
    // The relay's scan: pending rows in commit order.
    `CREATE INDEX IF NOT EXISTS ${bare(r.dueIndex)} ON ${r.table} (seq) WHERE state = 'pending'`,
    // "Is an older row of this key still unpublished?", asked for every candidate.
    `CREATE INDEX IF NOT EXISTS ${bare(r.keyIndex)} ON ${r.table} (ordering_key, seq) WHERE state <> 'published'`,
    // Retention: published rows by age.
    `CREATE INDEX IF NOT EXISTS ${bare(r.publishedIndex)} ON ${r.table} (published_at)`,
  ];
}

/** The transactional outbox's table (`eo_outbox`), as a `TableFamily`. */
export const outboxTables: TableFamily = {
  name: 'outbox',
  summary: 'the transactional outbox (one row per message to publish)',
  defaultTable: DEFAULT_OUTBOX_TABLE,
  steps: (ref) => [
    {
      version: 1,
      summary: 'the outbox table, its lease sequence, its due, key and published_at indexes',
      statements: outboxVersion1(ref),
    },
  ],
};

/**
 * Brings the outbox table up to this version (creates it, its lease sequence and
 * indexes), recording each step in the schema's `effectively_once_migrations` ledger.
 * Idempotent and safe from many processes at once; when nothing is pending it only
 * reads the ledger.
 */
export async function migrateOutbox(pool: Pool, options: OutboxTableOptions = {}): Promise<void> {
  await applyMigrations(pool, outboxTables, outboxRef(options));
}

/** Options of {@link pruneOutbox}. */
export interface PruneOutboxOptions extends OutboxTableOptions {
  /** Delete rows published before this instant, or more than this many ms ago (database clock). */
  olderThan: Date | number;
  /** Rows deleted per statement. Default 1000. */
  batchSize?: number;
  /** Stop early (between batches) when aborted. */
  signal?: AbortSignal;
  /** Largest share of the time spent deleting, (0, 1]. Default 1. */
  dutyCycle?: number;
}

/**
 * Deletes rows published before `olderThan` (a Date, or ms ago on the database's
 * clock) in bounded SKIP LOCKED batches; returns how many went. Pending and parked
 * rows are never deleted. Keep published rows as long as you want them for audit: the
 * downstream dedup does not need them (the id travels with the message).
 */
export function pruneOutbox(pool: Pool, options: PruneOutboxOptions): Promise<number> {
  return pruneTable(
    pool,
    { ref: outboxRef(options), keyColumns: ['id'], timeColumn: 'published_at' },
    options,
  );
}
