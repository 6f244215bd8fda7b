import pg from 'pg';

/**
 * The HTTP benches' schema, fresh: `charges` (the effect every mode writes) and the
 * seed text's `seed_keys` table, as it gives it. The key table is the library's own.
 */
export async function createBenchTables(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.query(`CREATE SCHEMA ${schema}`);
    await client.query(`CREATE TABLE ${schema}.charges (
      id bigserial PRIMARY KEY, customer_id text NOT NULL, amount_cents bigint NOT NULL,
      idem_key text, created_at timestamptz NOT NULL DEFAULT now())`);
    await client.query(`CREATE TABLE ${schema}.seed_keys (
      key text PRIMARY KEY, request_hash text NOT NULL, status_code int, response jsonb,
      created_at timestamptz NOT NULL DEFAULT now())`);
  } finally {
    await client.end();
  }
}
