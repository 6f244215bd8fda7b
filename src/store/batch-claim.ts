import type { SqlRunner } from '../data-layer.js';
import type { ClaimSession } from '../tx/claim-transaction.js';
import {
  expirySql,
  type IsolationLevel,
  runClaim,
  STORED_HASH_HEX,
  storedHashOf,
} from './claim.js';
import { arrayLiteral, sqlLiteral } from './literals.js';
import { qualifiedTable, type TableRef } from './identifiers.js';

/** One key of a batch claim. */
export interface BatchClaimItem {
  key: string;
  hash: Buffer | null;
}

/** Claims many keys in one statement, for batch mode. */
export class BatchClaimStatements {
  private readonly table: string;
  private readonly expires: string;

  /** `keepMs`: the consumer's retention, written on each claimed row as its expiry. */
  constructor(
    ref: TableRef,
    private readonly isolation: IsolationLevel | undefined,
    keepMs?: number,
  ) {
    this.table = qualifiedTable(ref);
    this.expires = expirySql(keepMs);
  }

  /**
   * Opens the transaction and claims every key with one `INSERT ... SELECT FROM unnest`.
   * Keys are inserted in sorted order so two batches sharing keys take their row locks
   * in the same order and cannot deadlock. Returns the keys this batch now owns and the
   * transaction id (null when it owns none).
   *
   * Like the per-message claim, everything goes in one simple-protocol round trip
   * (round trips saved per batch are worth more than bind parameters): the arrays travel
   * as escaped array literals.
   */
  async begin(
    session: ClaimSession,
    consumer: string,
    items: readonly BatchClaimItem[],
    lockTimeoutMs: number,
  ): Promise<{ claimed: Set<string>; xid: string | null }> {
    const sorted = [...items].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const keys = arrayLiteral(sorted.map((i) => i.key));
    // Hex digits need neither quotes nor escapes, in the array nor in the statement:
    // `\\x` bytea text would be escaped twice over (array, then E'' literal), per key.
    let hashes = '{';
    for (let i = 0; i < sorted.length; i++) {
      const hash = sorted[i]!.hash;
      hashes += (i > 0 ? ',' : '') + (hash === null ? 'NULL' : hash.toString('hex'));
    }
    hashes += '}';
    const insert =
      `INSERT INTO ${this.table} (consumer, message_key, payload_hash, expires_at)` +
      ` SELECT ${sqlLiteral(consumer)}, k, decode(h, 'hex'), ${this.expires}` +
      ` FROM unnest(${sqlLiteral(keys)}::text[], '${hashes}'::text[])` +
      ` WITH ORDINALITY AS u(k, h, n) ORDER BY n ON CONFLICT DO NOTHING`;
    const { rows, xid } = await runClaim<{ message_key: string }>(
      session,
      insert,
      'message_key',
      items.length,
      lockTimeoutMs,
      this.isolation,
    );
    const claimed = new Set(rows.map((r) => r.message_key));
    return { claimed, xid: claimed.size > 0 ? xid : null };
  }

  /** Stored hashes of keys processed before (for mismatch detection). */
  async storedHashes(
    client: SqlRunner,
    consumer: string,
    keys: readonly string[],
  ): Promise<Map<string, Buffer | null>> {
    if (keys.length === 0) return new Map();
    const result = await client.query<{ message_key: string; payload_hash: unknown }>(
      `SELECT message_key, ${STORED_HASH_HEX} FROM ${this.table} WHERE consumer = $1 AND message_key = ANY($2::text[])`,
      [consumer, keys],
    );
    return new Map(result.rows.map((r) => [r.message_key, storedHashOf(r.payload_hash)]));
  }
}
