/**
 * The smallest Postgres store for @node-idempotency/core, written to its documented
 * `StorageAdapter` interface (setIfNotExists / set / get, each with a TTL in ms). An
 * expired row counts as absent, as the package's memory adapter treats it. The
 * interface takes no transaction: the handler's charge and the stored response
 * commit separately, whatever the store.
 */
import type { StorageAdapter } from '@node-idempotency/storage';
import type pg from 'pg';

/** Its table, in the pool's search_path (the parent creates it before any server starts). */
export const NODE_IDEMPOTENCY_TABLE = `
  CREATE TABLE node_idempotency_cache (
    key        text PRIMARY KEY,
    val        text NOT NULL,
    expires_at timestamptz
  )`;

const EXPIRES = "now() + $3::double precision * interval '1 millisecond'";

export class PostgresStorageAdapter implements StorageAdapter {
  constructor(private readonly pool: pg.Pool) {}

  /** Inserts, or takes over an expired row; true when this call now holds the key. */
  setIfNotExists = async (
    key: string,
    val: string,
    { ttl }: { ttl?: number } = {},
  ): Promise<boolean> => {
    const { rowCount } = await this.pool.query(
      `INSERT INTO node_idempotency_cache AS c (key, val, expires_at) VALUES ($1, $2, ${EXPIRES})
       ON CONFLICT (key) DO UPDATE SET val = EXCLUDED.val, expires_at = EXCLUDED.expires_at
        WHERE c.expires_at IS NOT NULL AND c.expires_at <= now()`,
      [key, val, ttl ?? null],
    );
    return rowCount === 1;
  };

  set = async (key: string, val: string, { ttl }: { ttl?: number }): Promise<void> => {
    await this.pool.query(
      `INSERT INTO node_idempotency_cache (key, val, expires_at) VALUES ($1, $2, ${EXPIRES})
       ON CONFLICT (key) DO UPDATE SET val = EXCLUDED.val, expires_at = EXCLUDED.expires_at`,
      [key, val, ttl ?? null],
    );
  };

  get = async (key: string): Promise<string | undefined> => {
    const { rows } = await this.pool.query<{ val: string }>(
      `SELECT val FROM node_idempotency_cache
        WHERE key = $1 AND (expires_at IS NULL OR expires_at > now())`,
      [key],
    );
    return rows[0]?.val;
  };
}
