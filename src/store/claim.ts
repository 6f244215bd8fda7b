import type { PoolClient, QueryResult } from 'pg';
import { qualifiedTable, type TableRef } from './identifiers.js';
import { sqlLiteral } from './literals.js';

/** SQLSTATE raised when `lock_timeout` expires while the claim waits for another delivery. */
export const LOCK_NOT_AVAILABLE = '55P03';

/**
 * Builds the claim statements for one dedup table. The claim is sent as one
 * simple-protocol round trip (BEGIN, a transaction-local lock_timeout, the INSERT,
 * and the timeout reset) because round trips dominate the cost of a message; the
 * values are escaped with pg's literal rules (see sqlLiteral), the names are quoted.
 */
export class ClaimStatements {
  private readonly table: string;

  constructor(ref: TableRef) {
    this.table = qualifiedTable(ref);
  }

  /**
   * Opens the transaction and claims `(consumer, key)`. The INSERT blocks while another
   * open transaction holds the same key and raises 55P03 after `lockTimeoutMs`.
   * Resolves true when this delivery owns the key, false when it was processed before.
   */
  async begin(
    client: PoolClient,
    consumer: string,
    key: string,
    hash: Buffer | null,
    lockTimeoutMs: number,
  ): Promise<boolean> {
    const values = [sqlLiteral(consumer), sqlLiteral(key)];
    const hashLiteral = hash === null ? 'NULL' : `'\\x${hash.toString('hex')}'::bytea`;
    const sql =
      `BEGIN; SET LOCAL lock_timeout = ${Math.max(1, Math.floor(lockTimeoutMs))};` +
      ` INSERT INTO ${this.table} (consumer, message_key, payload_hash)` +
      ` VALUES (${values[0]}, ${values[1]}, ${hashLiteral}) ON CONFLICT DO NOTHING;` +
      ` SET LOCAL lock_timeout TO DEFAULT;`;
    // The INSERT's command tag says whether a row went in: no RETURNING row to parse.
    const results = (await client.query(sql)) as unknown as QueryResult[];
    return results[2]?.rowCount === 1;
  }

  /** Reads the stored hash of a key already processed, then ends the (empty) transaction. */
  async storedHashAndRollback(
    client: PoolClient,
    consumer: string,
    key: string,
  ): Promise<Buffer | null> {
    const result = await client.query<{ payload_hash: Buffer | null }>(
      `SELECT payload_hash FROM ${this.table} WHERE consumer = $1 AND message_key = $2`,
      [consumer, key],
    );
    await client.query('ROLLBACK');
    return result.rows[0]?.payload_hash ?? null;
  }
}
