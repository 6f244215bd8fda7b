import pg from 'pg';
import { migrate } from 'effectively-once';

/** Everything the bench writes lives in this schema; it is dropped and recreated per run. */
export const BENCH_SCHEMA = 'eo_bench';
/** Dedup namespace (`processed_messages.consumer`) of the effectively-once scenarios. */
export const CONSUMER_NAME = 'bench';
/**
 * A run's own dedup rows: claimed within the last hours. The dedup-growth history is at
 * least a day old, so this tells them apart through the processed_at index.
 */
export const RUN_ROWS = `processed_at > now() - interval '6 hours'`;

/** A pool whose unqualified names resolve in the bench schema. */
export function createPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    options: `-c search_path=${BENCH_SCHEMA}`,
  });
  pool.on('error', (err) => console.error('[bench] idle pg client error', err));
  return pool;
}

/** Drops and recreates the bench schema: charges, the inbox and the dedup table. */
export async function createSchema(pool: pg.Pool): Promise<void> {
  await pool.query(`DROP SCHEMA IF EXISTS ${BENCH_SCHEMA} CASCADE`);
  await pool.query(`CREATE SCHEMA ${BENCH_SCHEMA}`);
  await pool.query(`
    CREATE TABLE ${BENCH_SCHEMA}.charges (
      id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      message_id   bigint      NOT NULL,
      amount_cents int         NOT NULL,
      sent_at      timestamptz NOT NULL,
      created_at   timestamptz NOT NULL DEFAULT clock_timestamp()
    )`);
  await pool.query(`
    CREATE TABLE ${BENCH_SCHEMA}.inbox (
      message_id   bigint PRIMARY KEY,
      body         text        NOT NULL,
      received_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
      processed_at timestamptz
    )`);
  await pool.query(
    `CREATE INDEX inbox_pending_idx ON ${BENCH_SCHEMA}.inbox (received_at) WHERE processed_at IS NULL`,
  );
  await migrate(pool, { schema: BENCH_SCHEMA });
}

/** Empties every table, so each scenario run starts from the same state. */
export async function resetTables(pool: pg.Pool): Promise<void> {
  await pool.query(
    `TRUNCATE ${BENCH_SCHEMA}.charges, ${BENCH_SCHEMA}.inbox, ${BENCH_SCHEMA}.processed_messages`,
  );
}

/** What the effect table says after a drain. Latency: per message, its first effect's `created_at - sent_at`. */
export interface EffectSummary {
  rows: number;
  distinct: number;
  dedupRows: number;
  p50Ms: number | null;
  p99Ms: number | null;
}

/** `dedupSchema`: where the run's `processed_messages` is (the bench schema, or the dedup-growth history's). */
export async function summarizeEffects(pool: pg.Pool, dedupSchema: string): Promise<EffectSummary> {
  const { rows } = await pool.query<{
    rows: number;
    distinct: number;
    p50: number | null;
    p99: number | null;
  }>(`
    SELECT (SELECT count(*) FROM charges)::int AS rows,
           count(*)::int AS distinct,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS p50,
           percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) AS p99
      FROM (SELECT extract(epoch FROM min(created_at) - min(sent_at)) * 1000 AS ms
              FROM charges GROUP BY message_id) AS per_message`);
  const dedup = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${dedupSchema}.processed_messages WHERE consumer = $1 AND ${RUN_ROWS}`,
    [CONSUMER_NAME],
  );
  const row = rows[0];
  return {
    rows: row?.rows ?? 0,
    distinct: row?.distinct ?? 0,
    dedupRows: dedup.rows[0]?.n ?? 0,
    p50Ms: row?.p50 ?? null,
    p99Ms: row?.p99 ?? null,
  };
}
