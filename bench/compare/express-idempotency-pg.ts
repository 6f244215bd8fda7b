/**
 * The smallest Postgres store for express-idempotency, written to its documented
 * adapter interface (`IIdempotencyDataAdapter`: find, create, update, delete by key).
 * The interface takes no transaction: each call is a statement of its own, so the
 * handler's charge and the stored response commit separately, whatever the store.
 */
import type { IIdempotencyDataAdapter, IdempotencyResource } from 'express-idempotency';
import type pg from 'pg';

/** Its table, in the pool's search_path (the parent creates it before any server starts). */
export const EXPRESS_IDEMPOTENCY_TABLE = `
  CREATE TABLE express_idempotency_resources (
    idempotency_key text PRIMARY KEY,
    resource        jsonb NOT NULL
  )`;

export class PostgresDataAdapter implements IIdempotencyDataAdapter {
  constructor(private readonly pool: pg.Pool) {}

  async findByIdempotencyKey(idempotencyKey: string): Promise<IdempotencyResource | null> {
    const { rows } = await this.pool.query<{ resource: IdempotencyResource }>(
      'SELECT resource FROM express_idempotency_resources WHERE idempotency_key = $1',
      [idempotencyKey],
    );
    return rows[0]?.resource ?? null;
  }

  /** Throws on a key already there, as the package's in-memory adapter does ("Duplicate"). */
  async create(resource: IdempotencyResource): Promise<void> {
    await this.pool.query(
      'INSERT INTO express_idempotency_resources (idempotency_key, resource) VALUES ($1, $2)',
      [resource.idempotencyKey, JSON.stringify(resource)],
    );
  }

  async update(resource: IdempotencyResource): Promise<void> {
    await this.pool.query(
      'UPDATE express_idempotency_resources SET resource = $2 WHERE idempotency_key = $1',
      [resource.idempotencyKey, JSON.stringify(resource)],
    );
  }

  async delete(idempotencyKey: string): Promise<void> {
    await this.pool.query('DELETE FROM express_idempotency_resources WHERE idempotency_key = $1', [
      idempotencyKey,
    ]);
  }
}
