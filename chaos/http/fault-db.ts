import type pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';
import { createChaosSchema, tables } from '../consumer/db.js';

/**
 * The handler-fault routes' tables, beside the broker runs' (`createChaosSchema`: the
 * deferred foreign key and the fault log come from there):
 * - `effects`: one row per effect part a handler run wrote through `ctx.tx` (`main`,
 *   then `tail`, `after-answer`, `floating` as the kind has them), with the run's id.
 * - `runs`: a sequence; each handler run takes its id from it (sequences ignore
 *   rollbacks), and names itself in its answer (`x-chaos-answer: <op> <run>`).
 * - `timings`: for runs that ran past `timeoutMs` on purpose, how long after the
 *   handler started their answer went out (or the connection closed unanswered).
 */
export function faultTables(schema: string): { effects: string; runs: string; timings: string } {
  const s = quoteIdentifier(schema);
  return { effects: `${s}.effects`, runs: `${s}.runs`, timings: `${s}.timings` };
}

export async function createHttpChaosSchema(pool: pg.Pool, schema: string): Promise<void> {
  await createChaosSchema(pool, schema);
  const t = faultTables(schema);
  await pool.query(
    `CREATE TABLE ${t.effects} (id bigserial PRIMARY KEY, op text NOT NULL, run bigint NOT NULL,
       part text NOT NULL, tenant text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`,
  );
  await pool.query(`CREATE INDEX ON ${t.effects} (op, run, part)`);
  await pool.query(`CREATE SEQUENCE ${t.runs}`);
  await pool.query(
    `CREATE TABLE ${t.timings} (op text NOT NULL, run bigint NOT NULL, status int,
       answered boolean NOT NULL, ms int NOT NULL)`,
  );
}

/** An effect row as the checker reads it. */
export interface EffectRow {
  op: string;
  run: number;
  part: string;
  /** The transaction that wrote it (`xmin`): one run's rows must share one. */
  tx: string;
}

export async function readEffects(pool: pg.Pool, schema: string): Promise<EffectRow[]> {
  const { rows } = await pool.query<{ op: string; run: string; part: string; tx: string }>(
    `SELECT op, run::text, part, xmin::text AS tx FROM ${faultTables(schema).effects} ORDER BY id`,
  );
  return rows.map((r) => ({ ...r, run: Number(r.run) }));
}

/** Runs in which a planned fault fired, per operation (the fault log's `attempt` is the run id). */
export async function readFired(
  pool: pg.Pool,
  schema: string,
): Promise<{ runs: Map<string, Set<number>>; byKind: Map<string, number> }> {
  const { rows } = await pool.query<{ key: string; kind: string; attempt: number }>(
    `SELECT key, kind, attempt FROM ${tables(schema).faultLog} WHERE code IS NULL`,
  );
  const runs = new Map<string, Set<number>>();
  const byKind = new Map<string, number>();
  for (const r of rows) {
    runs.set(r.key, (runs.get(r.key) ?? new Set()).add(r.attempt));
    byKind.set(r.kind, (byKind.get(r.kind) ?? 0) + 1);
  }
  return { runs, byKind };
}

/** A timed-out run's answer, as the server saw it go. */
export interface TimingRow {
  op: string;
  run: number;
  status: number | null;
  answered: boolean;
  ms: number;
}

export async function readTimings(pool: pg.Pool, schema: string): Promise<TimingRow[]> {
  const { rows } = await pool.query<Omit<TimingRow, 'run'> & { run: string }>(
    `SELECT op, run::text, status, answered, ms FROM ${faultTables(schema).timings}`,
  );
  return rows.map((r) => ({ ...r, run: Number(r.run) }));
}
