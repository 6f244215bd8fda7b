/**
 * Attack on steps' derived provider key (attack35).
 *
 * Promise (docs/steps.md): "Two services sharing a database separate by scope, or by
 * `table`", and an outside call's key is derived so that it is "the same for a flow's
 * key and step on every run and owner, and different for any other" (src/steps/flow.ts,
 * derivedKey).
 *
 * Attack: two services share one database and one payment-provider account, and separate
 * as the docs allow: by `table` (each its own flows table), keeping the consumer door's
 * default scope (`consumer`) and a flow named `charge`. Both get a message keyed
 * `order-42` (their own orders, each with its own dedup table).
 *
 * Observed on main: derivedKey hashes scope, key, flow and step only, not the table (or
 * schema): both services send the provider the same idempotency key, the provider
 * deduplicates the second call into the first's charge, and both flows record that one
 * charge as their own. The second service's charge is lost.
 */
import { describe, expect, it } from '@jest/globals';
import { createFlowRunner, defineFlow } from 'effectively-once';
import { createCharge } from '../../../kit/provider/client.js';
import { startProvider } from '../../../kit/provider/provider.js';
import { createTestDatabase } from '../../helpers/db.js';

describe('attack35: steps separated by table share derived provider keys', () => {
  it('two services on two flows tables get two charges for their own key order-42', async () => {
    const db = await createTestDatabase('a35_dkey');
    const provider = await startProvider();
    try {
      // The same flow in both services (kit/steps/charge.ts's shape, one call).
      const flow = defineFlow<{ cents: number }>('charge', async (input, run) => {
        const charge = await run.call('charge', (key, signal) =>
          createCharge(provider.url, { amount: input.cents }, { idempotencyKey: key, signal }),
        );
        return { status: 201, body: { charge: charge.id } };
      });
      // Service A and service B: one database, separated by `table` as the docs allow.
      const a = createFlowRunner({ pool: db.pool, schema: db.schema, table: 'a_flows' });
      const b = createFlowRunner({ pool: db.pool, schema: db.schema, table: 'b_flows' });
      const start = { scope: 'consumer', key: 'order-42', input: { cents: 500 } };
      const fromA = await a.run(flow, start);
      const fromB = await b.run(flow, start);
      expect(fromA).toMatchObject({ kind: 'answered', replayed: false });
      expect(fromB).toMatchObject({ kind: 'answered', replayed: false });
      // Two services, two orders: two charges applied by the provider.
      expect(provider.appliedByKey().size).toBe(2);
      const idOf = (o: typeof fromA): unknown =>
        o.kind === 'answered' ? (o.answer.body as { charge: string }).charge : undefined;
      expect(idOf(fromB)).not.toBe(idOf(fromA));
    } finally {
      await provider.close();
      await db.close();
    }
  });
});
