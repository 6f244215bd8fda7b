import pg from 'pg';
import { quoteIdentifier } from '../src/store/identifiers.js';

/**
 * The chaos run's tables, in a schema of their own (`chaos_<run id>`), next to the
 * dedup table the consumers migrate there:
 * - `counters`: one row per key, `n` incremented by every applied effect. Exactly-once
 *   means n = 1 for every logical key and no row for a poison key.
 * - `ledger`: one row per applied effect (who applied it, on which attempt), for
 *   telling apart a double from a lost message when something goes wrong.
 */
export function tables(schema: string): { counters: string; ledger: string } {
  const s = quoteIdentifier(schema);
  return { counters: `${s}.counters`, ledger: `${s}.ledger` };
}

export function adminPool(databaseUrl: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: 3,
    connectionTimeoutMillis: 5000,
  });
  // Postgres restarts on purpose: idle clients report it here.
  pool.on('error', () => undefined);
  return pool;
}

export async function createChaosSchema(pool: pg.Pool, schema: string): Promise<void> {
  const t = tables(schema);
  await pool.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
  await pool.query(`CREATE TABLE ${t.counters} (key text PRIMARY KEY, n int NOT NULL)`);
  await pool.query(
    `CREATE TABLE ${t.ledger} (id bigserial PRIMARY KEY, key text NOT NULL, worker int NOT NULL,
       pid int NOT NULL, attempt int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
  );
}

export async function dropChaosSchema(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`);
}

/** Keys applied at least once so far (the run's progress); undefined while Postgres is down. */
export async function appliedCount(pool: pg.Pool, schema: string): Promise<number | undefined> {
  try {
    const { rows } = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${tables(schema).counters}`,
    );
    return rows[0]?.n ?? 0;
  } catch {
    return undefined;
  }
}

/** The final state: every counter, and the ledger's row count per key. */
export async function readCounters(
  pool: pg.Pool,
  schema: string,
): Promise<{ counters: Map<string, number>; ledger: Map<string, number>; ledgerRows: number }> {
  const t = tables(schema);
  const counters = new Map<string, number>();
  for (const row of (
    await pool.query<{ key: string; n: number }>(`SELECT key, n FROM ${t.counters}`)
  ).rows) {
    counters.set(row.key, row.n);
  }
  const ledger = new Map<string, number>();
  let ledgerRows = 0;
  const grouped = await pool.query<{ key: string; n: number }>(
    `SELECT key, count(*)::int AS n FROM ${t.ledger} GROUP BY key`,
  );
  for (const row of grouped.rows) {
    ledger.set(row.key, row.n);
    ledgerRows += row.n;
  }
  return { counters, ledger, ledgerRows };
}
