/**
 * The charge flow the steps tests (and the chaos harness) drive: insert an order, charge
 * it at the test provider (kit/provider) with the derived key, record the charge on the
 * order. Hooks let a test stop or kill the process at each boundary.
 */
import type { Pool, PoolClient } from 'pg';
import { defineFlow, type Flow } from 'effectively-once';
import { createCharge } from '../provider/client.js';

/** The flow's input: what the client posts. */
export interface ChargeInput {
  customer: string;
  amount: number;
}

/** Where a test may step in (each may return a promise to hold the flow there). */
export interface ChargeHooks {
  /** Inside the order step, after its INSERT, before its transaction commits. */
  midStep?: (key: string) => void | Promise<void>;
  /** The order step committed (with its recorded result), the charge not called yet. */
  afterOrder?: (key: string) => void | Promise<void>;
  /** Inside the charge call, before the provider is asked. */
  beforeCall?: (key: string) => void | Promise<void>;
  /** After the provider answered, before the charge's result is recorded. */
  afterCall?: (key: string) => void | Promise<void>;
  /** The charge's result recorded (committed), before the record step runs. */
  beforeRecord?: (key: string) => void | Promise<void>;
  /** Inside the record step, after its UPDATE, before its transaction commits. */
  midRecord?: (key: string) => void | Promise<void>;
  /** Every step committed, the final answer not stored yet. */
  afterRecord?: (key: string) => void | Promise<void>;
}

/**
 * The flow's recovery boundaries in the order a run passes them, each with the hook
 * that marks it (kit/steps/child.ts's EO_STEPS_KILL_AT / EO_STEPS_HOLD_AT names);
 * `before-answer` (the answer stored, the response not written) is the server's.
 */
export const CHARGE_POINTS = {
  'mid-step': 'midStep',
  'order-committed': 'afterOrder',
  'before-call': 'beforeCall',
  'after-call': 'afterCall',
  'before-record': 'beforeRecord',
  'mid-record': 'midRecord',
  'record-committed': 'afterRecord',
} as const satisfies Record<string, keyof ChargeHooks>;

/** A boundary of the flow's own (see {@link CHARGE_POINTS}). */
export type ChargePoint = keyof typeof CHARGE_POINTS;

/** The orders table the flow writes (no unique key on purpose: a double shows as two rows). */
export async function createOrdersTable(pool: Pool): Promise<void> {
  await pool.query(`CREATE TABLE IF NOT EXISTS orders (
    id        bigserial PRIMARY KEY,
    flow_key  text NOT NULL,
    customer  text NOT NULL,
    amount    integer NOT NULL,
    charge_id text
  )`);
}

/** The charge flow against the provider at `providerUrl`. */
export function chargeFlow(
  providerUrl: string,
  hooks: ChargeHooks = {},
  options: { callTimeoutMs?: number; name?: string } = {},
): Flow<ChargeInput> {
  return defineFlow<ChargeInput>(options.name ?? 'charge', async (input, run) => {
    const order = await run.step('order', async (tx: PoolClient) => {
      const { rows } = await tx.query<{ id: string }>(
        'INSERT INTO orders (flow_key, customer, amount) VALUES ($1, $2, $3) RETURNING id',
        [run.key, input.customer, input.amount],
      );
      await hooks.midStep?.(run.key);
      return { id: Number(rows[0]?.id) };
    });
    await hooks.afterOrder?.(run.key);
    const charge = await run.call('charge', async (key, signal) => {
      await hooks.beforeCall?.(run.key);
      const created = await createCharge(
        providerUrl,
        { amount: input.amount, order: order.id },
        { idempotencyKey: key, signal, timeoutMs: options.callTimeoutMs ?? 5_000 },
      );
      await hooks.afterCall?.(run.key);
      return { id: created.id };
    });
    await hooks.beforeRecord?.(run.key);
    await run.step('record', async (tx: PoolClient) => {
      await tx.query('UPDATE orders SET charge_id = $1 WHERE id = $2', [charge.id, order.id]);
      await hooks.midRecord?.(run.key);
    });
    await hooks.afterRecord?.(run.key);
    return { status: 201, body: { order: order.id, charge: charge.id } };
  });
}
