import type { Pool } from 'pg';
import type { SqlRunner } from '../../src/data-layer.js';
import { DEFAULT_SCHEMA, qualifiedTable } from '../../src/store/identifiers.js';
import { DEFAULT_OFFSETS_TABLE, kafkaOffsetsTables } from '../../src/store/kafka-offsets.js';
import { applyMigrations } from '../../src/store/migrator.js';

/** Options of {@link migrateKafkaOffsets}. */
export interface KafkaOffsetsTableOptions {
  /** Schema of the offsets table; created if missing. Default `public`. */
  schema?: string;
  /** Table name. Default `eo_kafka_offsets`. */
  table?: string;
}

/**
 * Brings the table that `offsets: 'postgres'` writes the next offset of each (group,
 * topic, partition) to, in the same transaction as each effect, up to this version,
 * recording each step in the schema's `effectively_once_migrations` ledger. Idempotent
 * and safe when many workers start at once; when nothing is pending it only reads the
 * ledger.
 */
export async function migrateKafkaOffsets(
  pool: Pool,
  options: KafkaOffsetsTableOptions = {},
): Promise<void> {
  await applyMigrations(pool, kafkaOffsetsTables, {
    schema: options.schema ?? DEFAULT_SCHEMA,
    table: options.table ?? DEFAULT_OFFSETS_TABLE,
  });
}

/**
 * A record below a stored next offset, as it was when its effect committed: its offset
 * and its timestamp (milliseconds, as Kafka gives them). A topic deleted and recreated
 * reuses the offsets but not the records: another timestamp at that offset says so.
 */
export interface OffsetMark {
  readonly offset: bigint;
  readonly timestamp: bigint;
}

/** A partition's stored next offset, and its mark (none in rows written before marks). */
export interface StoredOffset {
  readonly next: bigint;
  readonly mark: OffsetMark | undefined;
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

  /** Stored next offsets (and marks) of `topics`, keyed `topic/partition`. */
  async load(topics: string[]): Promise<Map<string, StoredOffset>> {
    const result = await this.pool.query<{
      topic: string;
      partition: number;
      next_offset: string;
      mark_offset?: string | null;
      mark_timestamp?: string | null;
    }>(
      `SELECT topic, partition, next_offset, mark_offset, mark_timestamp FROM ${this.table} WHERE group_id = $1 AND topic = ANY($2::text[])`,
      [this.groupId, topics],
    );
    return new Map(
      result.rows.map((row) => [
        `${row.topic}/${row.partition}`,
        {
          next: BigInt(row.next_offset),
          mark:
            row.mark_offset == null || row.mark_timestamp == null
              ? undefined
              : { offset: BigInt(row.mark_offset), timestamp: BigInt(row.mark_timestamp) },
        },
      ]),
    );
  }

  /**
   * Raises the partition's stored next offset to `nextOffset` inside the effect's
   * transaction (never lowers it: a slower owner's older value cannot move it back).
   * `mark`, a record of the transaction below `nextOffset`, replaces the stored one
   * whenever the offset is not lowered (the mark stays below the stored offset).
   */
  async save(
    tx: SqlRunner,
    topic: string,
    partition: number,
    nextOffset: bigint,
    mark: OffsetMark | undefined,
  ): Promise<void> {
    await tx.query(
      `INSERT INTO ${this.table} AS o (group_id, topic, partition, next_offset, mark_offset, mark_timestamp)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (group_id, topic, partition)
       DO UPDATE SET next_offset = GREATEST(o.next_offset, EXCLUDED.next_offset),
         mark_offset = CASE WHEN EXCLUDED.mark_offset IS NOT NULL AND EXCLUDED.next_offset >= o.next_offset
                            THEN EXCLUDED.mark_offset ELSE o.mark_offset END,
         mark_timestamp = CASE WHEN EXCLUDED.mark_offset IS NOT NULL AND EXCLUDED.next_offset >= o.next_offset
                               THEN EXCLUDED.mark_timestamp ELSE o.mark_timestamp END,
         updated_at = now()`,
      [
        this.groupId,
        topic,
        partition,
        nextOffset.toString(),
        mark?.offset.toString() ?? null,
        mark?.timestamp.toString() ?? null,
      ],
    );
  }
}
