import { kafkaOffsetsTables } from '../../adapters/kafka/postgres-offsets.js';
import { idempotencyKeyTables } from '../http/store.js';
import { outboxTables } from '../outbox/table.js';
import { dedupTables } from '../store/migrate.js';
import type { TableFamily } from '../store/table-family.js';

/** A table family as the CLI knows it: the family and the flag that names its table. */
export interface RegisteredFamily {
  family: TableFamily;
  /** Option naming the table; `table` is the common `--table` (the dedup table). */
  tableOption: string;
}

/**
 * Every table family `migrate` handles, in the order it migrates them. A new family
 * (a module exporting a `TableFamily` that owns its DDL) registers here with the flag
 * that names its table; `migrate`, `--only` and the help pick it up.
 */
export const TABLE_FAMILIES: readonly RegisteredFamily[] = [
  { family: dedupTables, tableOption: 'table' },
  { family: kafkaOffsetsTables, tableOption: 'kafka-offsets-table' },
  { family: idempotencyKeyTables, tableOption: 'http-keys-table' },
  { family: outboxTables, tableOption: 'outbox-table' },
];
