import type pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';
import type { FlowRow } from './checker.js';
import { ORDER_FLOW } from './flow.js';

/** The library's flows table in the run's schema (its default name). */
export const FLOWS_TABLE = 'eo_flows';

/** Every key row of the chaos flow: its key and stored status (null: unfinished). */
export async function readFlows(pool: pg.Pool, schema: string): Promise<FlowRow[]> {
  const { rows } = await pool.query<{ key: string; status: number | null }>(
    `SELECT flow_key AS key, status FROM ${quoteIdentifier(schema)}.${FLOWS_TABLE} WHERE flow = $1`,
    [ORDER_FLOW],
  );
  return rows;
}

/** How many of them have no final answer yet. */
export async function countUnfinished(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ${quoteIdentifier(schema)}.${FLOWS_TABLE}
      WHERE flow = $1 AND status IS NULL`,
    [ORDER_FLOW],
  );
  return rows[0]?.n ?? 0;
}

/** The scope the door recorded `key` under (undefined: no key row). */
export async function readScope(
  pool: pg.Pool,
  schema: string,
  key: string,
): Promise<string | undefined> {
  const { rows } = await pool.query<{ scope: string }>(
    `SELECT scope FROM ${quoteIdentifier(schema)}.${FLOWS_TABLE} WHERE flow = $1 AND flow_key = $2`,
    [ORDER_FLOW, key],
  );
  return rows[0]?.scope;
}
