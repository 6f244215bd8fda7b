/**
 * The flow every steps chaos server (and the final completer) runs, the issue's own
 * example: a DB step 'order' (one `orders` row), an outside call 'charge' to the test
 * provider with the derived key, a DB step 'record' (the order's charge, one `records`
 * row), then 201 `{ order, charge }`. A declined card is the provider's 402: the
 * library's default classifier makes it the flow's final answer; a 5xx, a timeout or a
 * reset is transient.
 */
import type { PoolClient } from 'pg';
import { defineFlow, type Flow } from 'effectively-once';
import type { OrderBody } from './plan.js';
import { createCharge } from '../../kit/provider/client.js';

/** The flow's registered name (the completer finds it by this). */
export const ORDER_FLOW = 'chaos-order';

/** The part of the library's `run` the flow uses. */
export interface OrderRun {
  readonly key: string;
  step<T>(name: string, work: (tx: PoolClient) => T | Promise<T>): Promise<T>;
  call<T>(name: string, work: (key: string, signal: AbortSignal) => T | Promise<T>): Promise<T>;
}

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
  boundary(point: 'in-order' | 'order' | 'charge' | 'record', key: string): void;
}

/** The flow's function. */
export function orderFlow(deps: OrderFlowDeps) {
  return async (input: OrderBody, run: OrderRun) => {
    const order = await run.step('order', async (tx) => {
      const { rows } = await tx.query<{ id: string }>(
        'INSERT INTO orders (op, customer_id, amount_cents) VALUES ($1, $2, $3) RETURNING id',
        [input.op, input.customerId, input.amountCents],
      );
      deps.boundary('in-order', run.key);
      return { id: rows[0]?.id ?? '?' };
    });
    deps.boundary('order', run.key);
    const charge = await run.call('charge', async (key, signal) => {
      const created = await createCharge(
        deps.providerUrl,
        {
          amount: input.amountCents,
          customerId: input.customerId,
          card: input.card,
          metadata: { op: input.op },
        },
        { idempotencyKey: key, timeoutMs: deps.callTimeoutMs, signal },
      );
      deps.boundary('charge', run.key);
      return { id: created.id };
    });
    await run.step('record', async (tx) => {
      await tx.query('UPDATE orders SET charge_id = $1 WHERE id = $2', [charge.id, order.id]);
      await tx.query('INSERT INTO records (op, order_id, charge_id) VALUES ($1, $2, $3)', [
        input.op,
        order.id,
        charge.id,
      ]);
    });
    deps.boundary('record', run.key);
    return { status: 201, body: { order: order.id, charge: charge.id } };
  };
}

/** The chaos flow, registered under {@link ORDER_FLOW}. */
export function chaosOrderFlow(deps: OrderFlowDeps): Flow<OrderBody> {
  return defineFlow(ORDER_FLOW, orderFlow(deps));
}
