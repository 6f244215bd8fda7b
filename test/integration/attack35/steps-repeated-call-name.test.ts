/**
 * Attack on derived keys within one flow (attack35).
 *
 * Promise (docs/steps.md): "Steps are identified by name and position"; an outside call
 * gets a key derived from "scope, key, flow and step name", "the same for a flow's key and
 * step on every run and owner, and different for any other" (src/steps/flow.ts).
 *
 * Attack: a flow that makes the same kind of call twice under one name — two instalments
 * charged in a loop, `run.call('charge', …)` at positions 0 and 1 — as the name-and-
 * position wording invites. Nothing refuses the repeated name.
 *
 * Observed on main: FlowDrive.call (src/steps/drive.ts) derives the key from the name
 * alone, so both instalments send the provider one idempotency key: the second is
 * deduplicated into the first (same amount) and the flow records the first's charge as
 * the second's: one charge applied where the flow answered two. (With other amounts the
 * provider refuses the reused key, 422, and the flow ends there.)
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { createFlowRunner, defineFlow } from 'effectively-once';
import { createCharge } from '../../../kit/provider/client.js';
import { startProvider } from '../../../kit/provider/provider.js';
import { createTestDatabase } from '../../helpers/db.js';

describe('attack35: one call name used twice in a flow', () => {
  it('two instalments are two charges, or the repeated name is refused', async () => {
    const db = await createTestDatabase('a35_repeat');
    const provider = await startProvider();
    try {
      const flow = defineFlow<{ instalments: number[] }>('instalments', async (input, run) => {
        const charges: string[] = [];
        for (const cents of input.instalments) {
          const charge = await run.call('charge', (key, signal) =>
            createCharge(provider.url, { amount: cents }, { idempotencyKey: key, signal }),
          );
          charges.push(charge.id);
        }
        return { status: 201, body: { charges } };
      });
      const runner = createFlowRunner({ pool: db.pool, schema: db.schema });
      const outcome = await runner.run(flow, {
        scope: 's',
        key: randomUUID(),
        input: { instalments: [250, 250] },
      });
      if (outcome.kind === 'answered') {
        // Answered two charges: the provider must have applied two.
        const { charges } = outcome.answer.body as { charges: string[] };
        expect(new Set(charges).size).toBe(2);
        expect([...provider.appliedByKey().values()]).toEqual([1, 1]);
      } else {
        // Or refused before any call went out twice under one key.
        expect(outcome.kind).toBe('refused');
        expect([...provider.appliedByKey().values()].every((n) => n <= 1)).toBe(true);
      }
    } finally {
      await provider.close();
      await db.close();
    }
  });
});
