import { qualifiedTable, quoteIdentifier, type TableRef } from './identifiers.js';
import { applyDdl, type Ddl, type TableFamily } from './table-family.js';

// The table family behind the Kafka adapter's `offsets: 'postgres'`. Its DDL lives in the
// store, beside the other families', so the CLI migrates and prints it without importing
// an adapter; the adapter (adapters/kafka/postgres-offsets.ts) reads and writes the rows.

/** Default name of the table behind `offsets: 'postgres'`. */
export const DEFAULT_OFFSETS_TABLE = 'eo_kafka_offsets';

// Fixed for every version: concurrent migrations of the same table must take the same lock.
const MIGRATION_LOCK_KEY = 0x656f_6b6f; // "eoko"

/** The offsets table: the one copy of its DDL. */
function kafkaOffsetsDdl(ref: TableRef): Ddl {
  const table = qualifiedTable(ref);
  return {
    statements: [
      `CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(ref.schema, 'schema')}`,
      `CREATE TABLE IF NOT EXISTS ${table} (
  group_id    text        NOT NULL,
  topic       text        NOT NULL,
  partition   integer     NOT NULL,
  next_offset bigint      NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  mark_offset    bigint,
  mark_timestamp bigint,
  PRIMARY KEY (group_id, topic, partition)
)`,
      // The mark (a record below next_offset: its offset and timestamp) came later: tables
      // made before it get the two columns. Finding another record there means the topic
      // was recreated.
      `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS "mark_offset" bigint, ADD COLUMN IF NOT EXISTS "mark_timestamp" bigint`,
    ],
    relations: [table],
    columns: [
      { relation: table, column: 'mark_offset' },
      { relation: table, column: 'mark_timestamp' },
    ],
  };
}

/** The table behind `offsets: 'postgres'`, as a {@link TableFamily}. */
export const kafkaOffsetsTables: TableFamily = {
  name: 'kafka-offsets',
  summary: "Kafka stored offsets (offsets: 'postgres'), one row per group, topic and partition",
  defaultTable: DEFAULT_OFFSETS_TABLE,
  ddl: kafkaOffsetsDdl,
  migrate: async (pool, ref) =>
    applyDdl(pool, kafkaOffsetsDdl(ref), {
      lockKey: MIGRATION_LOCK_KEY,
      operation: 'migrate kafka offsets',
      ref,
    }),
};
