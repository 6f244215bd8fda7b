/**
 * Attack on the call heartbeat (attack35).
 *
 * Promise (docs/steps.md): "fencing stops a stale owner": a run is refused
 * (`EO_FLOW_FENCED`) only once a later owner took over; the lease is extended by a
 * heartbeat during a call.
 *
 * Attack: a heartbeat's UPDATE is slow to reach Postgres (a busy pool, a slow network)
 * and lands after the call returned and its result was recorded (the test holds it until
 * the row shows the recorded call, then sends it: deterministic).
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

/**
 * A pool whose heartbeat extensions (the second and later `UPDATE … SET lease_until` at
 * position 0) are held until the call's result is recorded, then sent: a slow network,
 * made deterministic. `sent` resolves when one is held, `landed` once it has answered.
 */
function lateHeartbeatPool(
  pool: pg.Pool,
  recorded: () => Promise<boolean>,
): { pool: pg.Pool; sent: Promise<void>; landed: Promise<void> } {
  let heartbeats = 0;
  let onSent!: () => void;
  let onLanded!: () => void;
  const sent = new Promise<void>((resolve) => (onSent = resolve));
  const landed = new Promise<void>((resolve) => (onLanded = resolve));
  const proxy = new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
      return async (text: unknown, values?: unknown[]) => {
        const late =
          typeof text === 'string' &&
          /SET lease_until = now\(\) \+/.test(text) &&
          values?.[3] === 0 &&
          ++heartbeats >= 2;
        if (!late) return target.query(text as string, values);
        onSent();
        while (!(await recorded())) await new Promise((resolve) => setTimeout(resolve, 10));
        const result = await target.query(text, values);
        // Let the heartbeat's own callback run before the flow goes on.
        setTimeout(onLanded, 20);
        return result;
      };
    },
  });
  return { pool: proxy, sent, landed };
}

describe('attack35: a late heartbeat after the call was recorded', () => {
  it('does not fence the live owner that recorded the call', async () => {
    const db = await createTestDatabase('a35_fence');
    try {
      const key = randomUUID();
      const late = lateHeartbeatPool(db.pool, async () => {
        const { rows } = await db.pool.query<{ n: number }>(
          `SELECT jsonb_array_length(steps) AS n FROM ${db.table('eo_flows')} WHERE flow_key = $1`,
          [key],
        );
        return (rows[0]?.n ?? 0) >= 1;
      });
      const bounded = (p: Promise<void>): Promise<unknown> =>
        Promise.race([p, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      const flow = defineFlow('notify', async (_input, run) => {
        // A call that lasts until a heartbeat (every leaseMs / 3 = 100 ms) went out.
        const sent = await run.call('send', async () => {
          await bounded(late.sent);
          return 'sent';
        });
        const after = await run.step('after', async () => {
          // The heartbeat's late extend lands meanwhile.
          await bounded(late.landed);
          return 'ok';
        });
        const last = await run.step('last', () => 'done');
        return { status: 200, body: { sent, after, last } };
      });
      const runner = createFlowRunner({ pool: late.pool, schema: db.schema, leaseMs: 300 });
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
