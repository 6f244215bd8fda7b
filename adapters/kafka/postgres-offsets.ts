import type { Pool, PoolClient } from 'pg';
import {
  DEFAULT_SCHEMA,
  qualifiedTable,
  quoteIdentifier,
  type TableRef,
} from '../../src/store/identifiers.js';
import { applyDdl, type Ddl, type TableFamily } from '../../src/store/table-family.js';

/** Default name of the table behind `offsets: 'postgres'`. */
export const DEFAULT_OFFSETS_TABLE = 'eo_kafka_offsets';

/** Options of {@link migrateKafkaOffsets}. */
export interface KafkaOffsetsTableOptions {
  /** Schema of the offsets table; created if missing. Default `public`. */
  schema?: string;
  /** Table name. Default `eo_kafka_offsets`. */
  table?: string;
}

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
  PRIMARY KEY (group_id, topic, partition)
)`,
    ],
    relations: [table],
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

/**
 * Creates the table that `offsets: 'postgres'` writes the next offset of each
 * (group, topic, partition) to, in the same transaction as each effect. Idempotent and
 * safe when many workers start at once (transaction-scoped advisory lock; nothing runs
 * when the table exists).
 */
export async function migrateKafkaOffsets(
  pool: Pool,
  options: KafkaOffsetsTableOptions = {},
): Promise<void> {
  await kafkaOffsetsTables.migrate(pool, {
    schema: options.schema ?? DEFAULT_SCHEMA,
    table: options.table ?? DEFAULT_OFFSETS_TABLE,
  });
}

/** Reads and writes one consumer group's rows of the offsets table. */
export class PostgresOffsetStore {
  private readonly table: string;

  constructor(
    private readonly pool: Pick<Pool, 'query'>,
    private readonly groupId: string,
    ref: { schema: string; table: string },
  ) {
    this.table = qualifiedTable(ref);
  }

  /** Stored next offsets of `topics`, keyed `topic/partition`. */
  async load(topics: string[]): Promise<Map<string, bigint>> {
    const result = await this.pool.query<{ topic: string; partition: number; next_offset: string }>(
      `SELECT topic, partition, next_offset FROM ${this.table} WHERE group_id = $1 AND topic = ANY($2::text[])`,
      [this.groupId, topics],
    );
    return new Map(
      result.rows.map((row) => [`${row.topic}/${row.partition}`, BigInt(row.next_offset)]),
    );
  }

  /**
   * Raises the partition's stored next offset to `nextOffset` inside the effect's
   * transaction (never lowers it: a slower owner's older value cannot move it back).
   */
  async save(tx: PoolClient, topic: string, partition: number, nextOffset: bigint): Promise<void> {
    await tx.query(
      `INSERT INTO ${this.table} AS o (group_id, topic, partition, next_offset) VALUES ($1, $2, $3, $4)
       ON CONFLICT (group_id, topic, partition)
       DO UPDATE SET next_offset = GREATEST(o.next_offset, EXCLUDED.next_offset), updated_at = now()`,
      [this.groupId, topic, partition, nextOffset.toString()],
    );
  }
}
