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

/**
 * Where a charge flow keeps its effects: its own orders table (and ledger), and what it
 * asks the provider to charge. The tests' flow (kit's `orders`) and the chaos harness's
 * (its orders and `records` ledger) are the same three steps over two ledgers.
 */
export interface ChargeLedger<I> {
  /** Inside the `order` step's transaction: inserts the order; its id (JSON). */
  insertOrder(tx: PoolClient, input: I, key: string): Promise<string | number>;
  /** The provider request's body for the order. */
  chargeRequest(input: I, order: string | number): { amount: number } & Record<string, unknown>;
  /** Inside the `record` step's transaction: records the charge on the order. */
  recordCharge(tx: PoolClient, input: I, order: string | number, charge: string): Promise<void>;
}

/** Options of {@link chargeFlowOf}. */
export interface ChargeFlowOptions<I> {
  name: string;
  ledger: ChargeLedger<I>;
  /** The provider's base URL. */
  providerUrl: string;
  /** Per provider request: past it the call fails transiently. */
  callTimeoutMs: number;
  /** Told at each boundary of {@link CHARGE_POINTS} (may return a promise to hold there). */
  at?: (point: ChargePoint, key: string) => void | Promise<void>;
}

/**
 * The flow, the one owner of its shape: DB step `order`, call `charge` to the
 * provider with the derived key, DB step `record`, then 201 `{ order, charge }`. A
 * declined card is the provider's 402: the default classifier makes it the flow's final
 * answer; a 5xx, a timeout or a reset is transient.
 */
export function chargeFlowOf<I>(options: ChargeFlowOptions<I>): Flow<I> {
  const { ledger } = options;
  const at = async (point: ChargePoint, key: string): Promise<void> => {
    await options.at?.(point, key);
  };
  return defineFlow<I>(options.name, async (input, run) => {
    const order = await run.step('order', async (tx: PoolClient) => {
      const id = await ledger.insertOrder(tx, input, run.key);
      await at('mid-step', run.key);
      return { id };
    });
    await at('order-committed', run.key);
    const charge = await run.call('charge', async (key, signal) => {
      await at('before-call', run.key);
      const created = await createCharge(
        options.providerUrl,
        ledger.chargeRequest(input, order.id),
        {
          idempotencyKey: key,
          signal,
          timeoutMs: options.callTimeoutMs,
        },
      );
      await at('after-call', run.key);
      return { id: created.id };
    });
    await at('before-record', run.key);
    await run.step('record', async (tx: PoolClient) => {
      await ledger.recordCharge(tx, input, order.id, charge.id);
      await at('mid-record', run.key);
    });
    await at('record-committed', run.key);
    return { status: 201, body: { order: order.id, charge: charge.id } };
  });
}

/** kit's ledger: one `orders` row per flow key, its charge written on it. */
const ordersLedger: ChargeLedger<ChargeInput> = {
  insertOrder: async (tx, input, key) => {
    const { rows } = await tx.query<{ id: string }>(
      'INSERT INTO orders (flow_key, customer, amount) VALUES ($1, $2, $3) RETURNING id',
      [key, input.customer, input.amount],
    );
    return Number(rows[0]?.id);
  },
  chargeRequest: (input, order) => ({ amount: input.amount, order }),
  recordCharge: async (tx, _input, order, charge) => {
    await tx.query('UPDATE orders SET charge_id = $1 WHERE id = $2', [charge, order]);
  },
};

/** The charge flow against the provider at `providerUrl`. */
export function chargeFlow(
  providerUrl: string,
  hooks: ChargeHooks = {},
  options: { callTimeoutMs?: number; name?: string } = {},
): Flow<ChargeInput> {
  return chargeFlowOf({
    name: options.name ?? 'charge',
    ledger: ordersLedger,
    providerUrl,
    callTimeoutMs: options.callTimeoutMs ?? 5_000,
    at: (point, key) => hooks[CHARGE_POINTS[point]]?.(key),
  });
}
