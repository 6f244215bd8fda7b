import pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';
import { HOT_ROWS } from './handler-faults.js';

/**
 * The chaos run's tables, in a schema of their own (`chaos_<run id>`), next to the
 * dedup table the consumers migrate there:
 * - `counters`: one row per key, `n` incremented by every applied effect. Exactly-once
 *   means n = 1 for every logical key and no row for a poison key.
 * - `ledger`: one row per applied effect (who applied it, on which attempt, from which
 *   Kafka partition and offset, in which transaction), for telling apart a double from
 *   a lost message when something goes wrong, and for the order check: its serial id is
 *   the order effects were written in.
 * - `floating_late`: what a `floating` handler fault's late query wrote, with the
 *   transaction it ran in (it must never run outside the claim's).
 * - handler faults' tables (see handler-faults.ts): `swallow_probe` (one row, so
 *   inserting it again is a unique violation), `deferred_parent` / `deferred_child`
 *   (a DEFERRABLE INITIALLY DEFERRED foreign key, checked at COMMIT), `hot_rows` (the
 *   rows serialization pairs fight over; their total counts applied hot effects),
 *   `hot_arrivals` (where pair members wait for each other) and `fault_log` (every
 *   fault fired, and every serialization failure a hot handler saw, written with
 *   autocommit so it survives the rollback).
 */
export function tables(schema: string): ChaosTables {
  const s = quoteIdentifier(schema);
  return {
    counters: `${s}.counters`,
    ledger: `${s}.ledger`,
    swallowProbe: `${s}.swallow_probe`,
    deferredParent: `${s}.deferred_parent`,
    deferredChild: `${s}.deferred_child`,
    hotRows: `${s}.hot_rows`,
    hotArrivals: `${s}.hot_arrivals`,
    faultLog: `${s}.fault_log`,
    floatingLate: `${s}.floating_late`,
  };
}

export interface ChaosTables {
  counters: string;
  ledger: string;
  swallowProbe: string;
  deferredParent: string;
  deferredChild: string;
  hotRows: string;
  hotArrivals: string;
  faultLog: string;
  floatingLate: string;
}

export async function createChaosSchema(pool: pg.Pool, schema: string): Promise<void> {
  const t = tables(schema);
  await pool.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
  await pool.query(`CREATE TABLE ${t.counters} (key text PRIMARY KEY, n int NOT NULL)`);
  await pool.query(
    `CREATE TABLE ${t.ledger} (id bigserial PRIMARY KEY, key text NOT NULL, worker int NOT NULL,
       pid int NOT NULL, attempt int NOT NULL, part int, kafka_offset bigint,
       xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
       at timestamptz NOT NULL DEFAULT clock_timestamp())`,
  );
  await pool.query(
    `CREATE TABLE ${t.floatingLate} (id bigserial PRIMARY KEY, key text NOT NULL,
       xid xid8 NOT NULL DEFAULT pg_current_xact_id())`,
  );
  await pool.query(`CREATE TABLE ${t.swallowProbe} (id int PRIMARY KEY)`);
  await pool.query(`INSERT INTO ${t.swallowProbe} VALUES (1)`);
  await pool.query(`CREATE TABLE ${t.deferredParent} (id int PRIMARY KEY)`);
  await pool.query(
    `CREATE TABLE ${t.deferredChild} (id bigserial PRIMARY KEY, key text NOT NULL,
       parent int NOT NULL REFERENCES ${t.deferredParent} (id) DEFERRABLE INITIALLY DEFERRED)`,
  );
  await pool.query(`CREATE TABLE ${t.hotRows} (id int PRIMARY KEY, n bigint NOT NULL)`);
  await pool.query(
    `INSERT INTO ${t.hotRows} (id, n) SELECT g, 0 FROM generate_series(1, ${HOT_ROWS}) AS g`,
  );
  await pool.query(
    `CREATE TABLE ${t.hotArrivals} (pair int NOT NULL, key text NOT NULL, phase text NOT NULL,
       PRIMARY KEY (pair, key, phase))`,
  );
  await pool.query(
    `CREATE TABLE ${t.faultLog} (id bigserial PRIMARY KEY, key text NOT NULL, kind text NOT NULL,
       code text, attempt int NOT NULL, worker int NOT NULL, pid int NOT NULL,
       at timestamptz NOT NULL DEFAULT clock_timestamp())`,
  );
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

/** Handler faults fired (code null) and serialization failures seen (code set), per kind and code. */
export interface FaultLogRow {
  kind: string;
  code: string | null;
  n: number;
  keys: number;
}

export async function readFaultLog(pool: pg.Pool, schema: string): Promise<FaultLogRow[]> {
  const { rows } = await pool.query<FaultLogRow>(
    `SELECT kind, code, count(*)::int AS n, count(DISTINCT key)::int AS keys
       FROM ${tables(schema).faultLog} GROUP BY kind, code ORDER BY kind, code`,
  );
  return rows;
}

/**
 * Kafka order, per partition (`keyConcurrency` 1: the partition is the ordering key):
 * adjacent effects of a partition, in the order they were written, whose offsets go
 * backwards. A partition's effects are written one transaction at a time, in offset
 * order, so every such pair is a record applied before an earlier one.
 */
export async function orderViolations(
  pool: pg.Pool,
  schema: string,
): Promise<{ violations: number; examples: string[] }> {
  const { rows } = await pool.query<{ part: number; prev: string; next: string }>(
    `SELECT part, prev::text, kafka_offset::text AS next FROM (
       SELECT part, kafka_offset, lag(kafka_offset) OVER (PARTITION BY part ORDER BY id) AS prev
         FROM ${tables(schema).ledger} WHERE part IS NOT NULL) AS w
      WHERE kafka_offset < prev ORDER BY part`,
  );
  return {
    violations: rows.length,
    examples: rows.slice(0, 5).map((r) => `partition ${r.part}: offset ${r.next} after ${r.prev}`),
  };
}

/** Late writes of `floating` faults that ran outside the transaction that applied their key. */
export async function floatingOutside(pool: pg.Pool, schema: string): Promise<string[]> {
  const t = tables(schema);
  const { rows } = await pool.query<{ key: string }>(
    `SELECT f.key FROM ${t.floatingLate} f
      WHERE NOT EXISTS (SELECT 1 FROM ${t.ledger} l WHERE l.key = f.key AND l.xid = f.xid)`,
  );
  return rows.map((r) => r.key);
}

/** Sum of the hot rows: each applied hot effect adds 2 (one to each of its rows). */
export async function hotTotal(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ n: string | null }>(
    `SELECT sum(n)::text AS n FROM ${tables(schema).hotRows}`,
  );
  return Number(rows[0]?.n ?? 0);
}
