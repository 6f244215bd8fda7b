import type pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';

/**
 * The flow's own tables, in the run's schema: `orders` (the 'order' step inserts one
 * row per operation, the 'record' step sets its charge) and `records` (the 'record'
 * step's ledger row: one per application). No unique constraint on the operation, so
 * an effect applied twice is there to be counted, not refused.
 */
export const STEPS_TABLES = `
  CREATE TABLE IF NOT EXISTS orders (
    id           bigserial PRIMARY KEY,
    op           text   NOT NULL,
    customer_id  text   NOT NULL,
    amount_cents bigint NOT NULL,
    charge_id    text
  );
  CREATE TABLE IF NOT EXISTS records (
    id        bigserial PRIMARY KEY,
    op        text NOT NULL,
    order_id  bigint NOT NULL,
    charge_id text NOT NULL
  )`;

export async function createStepsSchema(pool: pg.Pool, schema: string): Promise<void> {
  const s = quoteIdentifier(schema);
  await pool.query(`CREATE SCHEMA ${s}`);
  await pool.query(`SET search_path TO ${s}; ${STEPS_TABLES}; RESET search_path`);
}

/** An operation's rows in one of the flow's tables. */
export interface EffectRows {
  /** Row ids, in order (more than one: applied twice). */
  ids: string[];
  /** The charge each row names (null: an order the 'record' step has not reached). */
  chargeIds: Array<string | null>;
}

export interface DbEffects {
  orders: Map<string, EffectRows & { orderIds: string[] }>;
  records: Map<string, EffectRows & { orderIds: string[] }>;
}

/** Both tables, by operation. */
export async function readEffects(pool: pg.Pool, schema: string): Promise<DbEffects> {
  const s = quoteIdentifier(schema);
  const read = async (sql: string): Promise<Map<string, EffectRows & { orderIds: string[] }>> => {
    const { rows } = await pool.query<{
      op: string;
      ids: string[];
      charges: Array<string | null>;
      orders: string[];
    }>(sql);
    return new Map(
      rows.map((r) => [r.op, { ids: r.ids, chargeIds: r.charges, orderIds: r.orders }]),
    );
  };
  return {
    orders: await read(
      `SELECT op, array_agg(id::text ORDER BY id) AS ids, array_agg(charge_id ORDER BY id) AS charges,
              array_agg(id::text ORDER BY id) AS orders
         FROM ${s}.orders GROUP BY op`,
    ),
    records: await read(
      `SELECT op, array_agg(id::text ORDER BY id) AS ids, array_agg(charge_id ORDER BY id) AS charges,
              array_agg(order_id::text ORDER BY id) AS orders
         FROM ${s}.records GROUP BY op`,
    ),
  };
}

/** A fingerprint of both tables, to show that the direct replay changed nothing. */
export async function effectsDigest(pool: pg.Pool, schema: string): Promise<string> {
  const s = quoteIdentifier(schema);
  const { rows } = await pool.query<{ d: string }>(
    `SELECT (SELECT count(*) || '/' || coalesce(max(id), 0) || '/' || count(charge_id) FROM ${s}.orders)
         || '|' || (SELECT count(*) || '/' || coalesce(max(id), 0) FROM ${s}.records) AS d`,
  );
  return rows[0]?.d ?? '';
}
