/**
 * Attack on the flow runner's keys (attack35).
 *
 * Promise: a flow key is one request's or message's (docs/steps.md: one row per key; the
 * runner is public, `createFlowRunner(...).run(flow, { scope, key, input })`, "to drive a
 * flow from anything else (a job, a script)"), and bad input gets a clear typed error
 * (every other door refuses a key with a lone UTF-16 surrogate: src/keys.ts validateKey,
 * because node-postgres sends U+FFFD in its place and two keys would become one).
 *
 * Attack: two jobs drive the same flow under two distinct, ill-formed keys that differ
 * only in their lone surrogate (`order-\uD800`, `order-\uDBFF`), with the same input.
 *
 * Observed on main: the runner validates neither key nor scope (src/steps/runner.ts
 * claimAndDrive, src/steps/flow.ts derivedKey encodes with Buffer.from(…, 'utf8')). Both
 * keys are stored as `order-\uFFFD`: the second job is answered the first's stored answer
 * as a replay and its own charge never happens (the provider saw one derived key).
 * A key with NUL is answered EO_DATABASE, retryable, for ever (second case).
 */
import { describe, expect, it } from '@jest/globals';
import { createFlowRunner, defineFlow } from 'effectively-once';
import { createCharge } from '../../../kit/provider/client.js';
import { startProvider } from '../../../kit/provider/provider.js';
import { createTestDatabase } from '../../helpers/db.js';

describe('attack35: flow keys with lone surrogates', () => {
  it('two distinct ill-formed keys are refused, or kept apart; never merged', async () => {
    const db = await createTestDatabase('a35_surrogate');
    const provider = await startProvider();
    try {
      const flow = defineFlow<{ cents: number }>('charge', async (input, run) => {
        const charge = await run.call('charge', (key, signal) =>
          createCharge(provider.url, { amount: input.cents }, { idempotencyKey: key, signal }),
        );
        return { status: 201, body: { charge: charge.id } };
      });
      const runner = createFlowRunner({ pool: db.pool, schema: db.schema });
      const input = { cents: 700 };
      const first = await runner.run(flow, { scope: 'jobs', key: 'order-\uD800', input });
      const second = await runner.run(flow, { scope: 'jobs', key: 'order-\uDBFF', input });
      for (const outcome of [first, second]) {
        // Either refused with a typed error (as every other door does), or its own flow.
        if (outcome.kind === 'refused') expect(outcome.error.code).toBe('EO_INVALID_KEY');
        else expect(outcome).toMatchObject({ kind: 'answered', replayed: false });
      }
      if (first.kind === 'answered' && second.kind === 'answered')
        expect(provider.appliedByKey().size).toBe(2);
    } finally {
      await provider.close();
      await db.close();
    }
  });

  it('a key Postgres text cannot hold (NUL) is refused with a typed error, not retried forever', async () => {
    // Observed on main: EO_DATABASE, retryable: the job is told to retry a key that can
    // never be stored (the consumer door's validateKey refuses it as EO_INVALID_KEY).
    const db = await createTestDatabase('a35_nul');
    try {
      const flow = defineFlow('noop', async () => ({ status: 204 }));
      const runner = createFlowRunner({ pool: db.pool, schema: db.schema });
      const outcome = await runner.run(flow, { scope: 'jobs', key: 'order-\u0000-1', input: {} });
      expect(outcome.kind === 'answered' ? 'answered' : outcome.error.code).toBe('EO_INVALID_KEY');
      expect(outcome.kind).toBe('refused');
    } finally {
      await db.close();
    }
  });
});
