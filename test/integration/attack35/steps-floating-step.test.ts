/**
 * Attack on when a flow's answer is stored (attack35).
 *
 * Promise (docs/steps.md): a database step's writes and its recorded result commit in one
 * transaction, the final answer is stored once the flow has run, and misuse of the run
 * object is refused rather than half-done ("Steps of one flow run one at a time (`EO_STATE`
 * if you start one before the previous settled)").
 *
 * Attack: the flow's function returns while its last database step is still running (a
 * step not awaited: `void run.step(...)`, the bug a floating promise is).
 *
 * Observed on main: FlowDrive.run (src/steps/drive.ts) stores the answer as soon as the
 * function returns; it never checks `inStep`. The 201 is stored and answered while the
 * step's transaction is open; the step's fenced UPDATE then finds `status IS NOT NULL`
 * and rolls the step back, writes included. The caller holds a stored, replayed 201 for
 * an effect that never committed.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { createFlowRunner, defineFlow } from 'effectively-once';
import { createTestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

describe('attack35: a flow that returns while a step is in flight', () => {
  it('never stores an answer before the step it started committed', async () => {
    const db = await createTestDatabase('a35_floating');
    try {
      await db.pool.query(`CREATE TABLE ${db.table('orders')} (flow_key text PRIMARY KEY)`);
      let stepEnded = false;
      const flow = defineFlow<{ n: number }>('order', async (_input, run) => {
        // The step is started and not awaited; it writes once the answer is stored (a slow
        // insert, made deterministic: it waits for the row's status, at most 5 s).
        void run
          .step('insert', async (tx) => {
            for (let waited = 0; waited < 5_000; waited += 20) {
              const { rows } = await db.pool.query(
                `SELECT 1 FROM ${db.table('eo_flows')} WHERE flow_key = $1 AND status IS NOT NULL`,
                [run.key],
              );
              if (rows.length > 0) break;
              await new Promise((resolve) => setTimeout(resolve, 20));
            }
            await tx.query(`INSERT INTO ${db.table('orders')} (flow_key) VALUES ($1)`, [run.key]);
            return 1;
          })
          .catch(() => undefined)
          .finally(() => (stepEnded = true));
        return { status: 201, body: { ok: true } };
      });
      const runner = createFlowRunner({ pool: db.pool, schema: db.schema });
      const key = randomUUID();
      const outcome = await runner.run(flow, { scope: 's', key, input: { n: 1 } });
      await waitFor(() => stepEnded, { what: 'the floating step settled' });
      const { rows } = await db.pool.query(
        `SELECT 1 FROM ${db.table('orders')} WHERE flow_key = $1`,
        [key],
      );
      // An answered 201 must mean the step's write committed; otherwise no answer.
      if (outcome.kind === 'answered') expect(rows).toHaveLength(1);
      // And a retry must not be handed a stored 201 for nothing.
      const again = await runner.run(flow, { scope: 's', key, input: { n: 1 } });
      if (again.kind === 'answered' && again.replayed) expect(rows).toHaveLength(1);
    } finally {
      await db.close();
    }
  });
});
