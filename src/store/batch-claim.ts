import type { PoolClient } from 'pg';
import { qualifiedTable, type TableRef } from './identifiers.js';

/** One key of a batch claim. */
export interface BatchClaimItem {
  key: string;
  hash: Buffer | null;
}

/** Claims many keys in one statement, for batch mode. */
export class BatchClaimStatements {
  private readonly table: string;

  constructor(ref: TableRef) {
    this.table = qualifiedTable(ref);
  }

  /**
   * Opens the transaction and claims every key with one `INSERT ... SELECT FROM unnest`.
   * Keys are inserted in sorted order so two batches sharing keys take their row locks
   * in the same order and cannot deadlock. Returns the keys this batch now owns.
   */
  async begin(
    client: PoolClient,
    consumer: string,
    items: readonly BatchClaimItem[],
    lockTimeoutMs: number,
  ): Promise<Set<string>> {
    await client.query(`BEGIN; SET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))}`);
    const sorted = [...items].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const result = await client.query<{ message_key: string }>(
      `INSERT INTO ${this.table} (consumer, message_key, payload_hash)
       SELECT $1, k, h FROM unnest($2::text[], $3::bytea[]) WITH ORDINALITY AS u(k, h, n) ORDER BY n
       ON CONFLICT DO NOTHING RETURNING message_key`,
      [consumer, sorted.map((i) => i.key), sorted.map((i) => i.hash)],
    );
    await client.query('SET LOCAL lock_timeout TO DEFAULT');
    return new Set(result.rows.map((r) => r.message_key));
  }

  /** Stored hashes of keys processed before (for mismatch detection). */
  async storedHashes(
    client: PoolClient,
    consumer: string,
    keys: readonly string[],
  ): Promise<Map<string, Buffer | null>> {
    if (keys.length === 0) return new Map();
    const result = await client.query<{ message_key: string; payload_hash: Buffer | null }>(
      `SELECT message_key, payload_hash FROM ${this.table} WHERE consumer = $1 AND message_key = ANY($2::text[])`,
      [consumer, keys],
    );
    return new Map(result.rows.map((r) => [r.message_key, r.payload_hash]));
  }
}
