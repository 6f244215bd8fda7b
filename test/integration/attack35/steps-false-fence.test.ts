/**
 * Attack on the call heartbeat (attack35).
 *
 * Promise (docs/steps.md): "fencing stops a stale owner": a run is refused
 * (`EO_FLOW_FENCED`) only once a later owner took over; the lease is extended by a
 * heartbeat during a call.
 *
 * Attack: a heartbeat's UPDATE is slow to reach Postgres (a busy pool, a slow network)
 * and lands after the call returned and its result was recorded.
 *
 * Observed on main: FlowDrive.withHeartbeat (src/steps/drive.ts) stops the interval when
 * the call returns but not the extend already in flight; that extend finds the row one
 * step further (`jsonb_array_length(steps) = position` fails, rowCount 0) and its
 * callback sets `stop = FlowFencedError` on the live, sole owner (fence 1, nobody took
 * over). The flow's next step throws EO_FLOW_FENCED, the run ends at a recovery point
 * without releasing its lease (the fenced path skips release), and the caller gets a 503:
 * a live owner fenced by its own heartbeat.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createFlowRunner, defineFlow } from 'effectively-once';
import { createTestDatabase } from '../../helpers/db.js';

/** A pool whose lease extensions (the heartbeat's UPDATE … SET lease_until) arrive late. */
function slowHeartbeatPool(pool: pg.Pool, delayMs: number): pg.Pool {
  return new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
      return async (text: unknown, values?: unknown[]) => {
        if (typeof text === 'string' && /SET lease_until = now\(\) \+/.test(text))
          await new Promise((resolve) => setTimeout(resolve, delayMs));
        return target.query(text as string, values);
      };
    },
  });
}

describe('attack35: a late heartbeat after the call was recorded', () => {
  it('does not fence the live owner that recorded the call', async () => {
    const db = await createTestDatabase('a35_fence');
    try {
      const flow = defineFlow('notify', async (_input, run) => {
        // A call longer than a heartbeat interval (leaseMs / 3 = 100 ms).
        const sent = await run.call('send', async () => {
          await new Promise((resolve) => setTimeout(resolve, 150));
          return 'sent';
        });
        const after = await run.step('after', async () => {
          // Long enough for the heartbeat's late extend to land meanwhile.
          await new Promise((resolve) => setTimeout(resolve, 250));
          return 'ok';
        });
        const last = await run.step('last', () => 'done');
        return { status: 200, body: { sent, after, last } };
      });
      const runner = createFlowRunner({
        pool: slowHeartbeatPool(db.pool, 200),
        schema: db.schema,
        leaseMs: 300,
      });
      const key = randomUUID();
      const outcome = await runner.run(flow, { scope: 's', key, input: {} });
      const { rows } = await db.pool.query<{ fence: string }>(
        `SELECT fence::text AS fence FROM ${db.table('eo_flows')} WHERE flow_key = $1`,
        [key],
      );
      // Nobody took over: the one owner is fence 1, and it must finish.
      expect(rows[0]?.fence).toBe('1');
      // On main: EO_FLOW_FENCED, though no other owner ever existed.
      expect(outcome.kind === 'answered' ? 'answered' : outcome.error.code).toBe('answered');
      expect(outcome).toMatchObject({ kind: 'answered', replayed: false });
    } finally {
      await db.close();
    }
  });
});
