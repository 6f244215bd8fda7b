/**
 * The flow every steps chaos server (and the final completer) runs: kit/steps's charge
 * flow (its one owner: DB step 'order', call 'charge' to the test provider with the
 * derived key, DB step 'record', then 201 `{ order, charge }`) over the harness's own
 * ledger: an `orders` row per operation and, in the record step, a `records` row (a
 * record step applied twice shows as two rows; an UPDATE twice would not).
 */
import type { Flow } from 'effectively-once';
import { chargeFlowOf, type ChargeLedger, type ChargePoint } from '../../kit/steps/charge.js';
import type { OrderBody } from './plan.js';

/** The flow's registered name (the completer finds it by this). */
export const ORDER_FLOW = 'chaos-order';

/** The boundaries the armed kills land at. */
export type ChaosBoundary = 'in-order' | 'order' | 'charge' | 'record';

export interface OrderFlowDeps {
  /** The provider's base URL (through the provider fault proxy). */
  providerUrl: string;
  /** Per provider request: past it the call fails transiently. */
  callTimeoutMs: number;
  /**
   * Told at each boundary, with the operation's key: `in-order` (inside the step, its
   * INSERT done, before its COMMIT), `order` (the step committed),
   * `charge` (the provider answered, its result not recorded yet), `record` (the last
   * step committed, the answer maybe not stored yet). The armed kills land there.
   */
  boundary(point: ChaosBoundary, key: string): void;
}

/** kit's boundaries the harness counts, by its own names. */
const BOUNDARIES: Partial<Record<ChargePoint, ChaosBoundary>> = {
  'mid-step': 'in-order',
  'order-committed': 'order',
  'after-call': 'charge',
  'record-committed': 'record',
};

const ledger: ChargeLedger<OrderBody> = {
  insertOrder: async (tx, input) => {
    const { rows } = await tx.query<{ id: string }>(
      'INSERT INTO orders (op, customer_id, amount_cents) VALUES ($1, $2, $3) RETURNING id',
      [input.op, input.customerId, input.amountCents],
    );
    return rows[0]?.id ?? '?';
  },
  chargeRequest: (input) => ({
    amount: input.amountCents,
    customerId: input.customerId,
    card: input.card,
    metadata: { op: input.op },
  }),
  recordCharge: async (tx, input, order, charge) => {
    await tx.query('UPDATE orders SET charge_id = $1 WHERE id = $2', [charge, order]);
    await tx.query('INSERT INTO records (op, order_id, charge_id) VALUES ($1, $2, $3)', [
      input.op,
      order,
      charge,
    ]);
  },
};

/** The chaos flow, registered under {@link ORDER_FLOW}. */
export function chaosOrderFlow(deps: OrderFlowDeps): Flow<OrderBody> {
  return chargeFlowOf({
    name: ORDER_FLOW,
    ledger,
    providerUrl: deps.providerUrl,
    callTimeoutMs: deps.callTimeoutMs,
    at: (point, key) => {
      const boundary = BOUNDARIES[point];
      if (boundary !== undefined) deps.boundary(boundary, key);
    },
  });
}
