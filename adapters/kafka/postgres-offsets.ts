import type { Pool, PoolClient } from 'pg';
import { DEFAULT_SCHEMA, qualifiedTable } from '../../src/store/identifiers.js';
import { DEFAULT_OFFSETS_TABLE, kafkaOffsetsTables } from '../../src/store/kafka-offsets.js';

/** Options of {@link migrateKafkaOffsets}. */
export interface KafkaOffsetsTableOptions {
  /** Schema of the offsets table; created if missing. Default `public`. */
  schema?: string;
  /** Table name. Default `eo_kafka_offsets`. */
  table?: string;
}

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
