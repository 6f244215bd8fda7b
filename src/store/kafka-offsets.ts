import { qualifiedTable, type TableRef } from './identifiers.js';
import type { TableFamily } from './table-family.js';

// The table family behind the Kafka adapter's `offsets: 'postgres'`. Its DDL lives in the
// store, beside the other families', so the CLI migrates and prints it without importing
// an adapter; the adapter (adapters/kafka/postgres-offsets.ts) reads and writes the rows.

/** Default name of the table behind `offsets: 'postgres'`. */
export const DEFAULT_OFFSETS_TABLE = 'eo_kafka_offsets';

/**
 * Version 1 of the offsets table. `IF NOT EXISTS`, so a table this same version made
 * before the ledger existed is adopted. A row's mark is a record below its next offset
 * (offset and timestamp): another record found there means the topic was recreated.
 */
function kafkaOffsetsVersion1(ref: TableRef): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(ref)} (
  group_id       text        NOT NULL,
  topic          text        NOT NULL,
  partition      integer     NOT NULL,
  next_offset    bigint      NOT NULL,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  mark_offset    bigint,
  mark_timestamp bigint,
  PRIMARY KEY (group_id, topic, partition)
)`,
  ];
}

/** The table behind `offsets: 'postgres'`, as a {@link TableFamily}. */
export const kafkaOffsetsTables: TableFamily = {
  name: 'kafka-offsets',
  summary: "Kafka stored offsets (offsets: 'postgres'), one row per group, topic and partition",
  defaultTable: DEFAULT_OFFSETS_TABLE,
  steps: (ref) => [
    { version: 1, summary: 'the offsets table', statements: kafkaOffsetsVersion1(ref) },
  ],
};
