/**
 * Attacks on steps that held (attack35): they pass on main, and add coverage the steps
 * suite lacked.
 *
 * - Two tenants send the same Idempotency-Key and body to one steps route: each gets its
 *   own flow, its own derived provider key and its own charge (promise: "a key sent by
 *   tenant A never replays tenant B's response"; derivedKey includes the scope).
 * - A retry racing the completer over one abandoned key: one takeover wins (fence + 1),
 *   the call is made with one derived key, applied once, and both see one answer.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { createFlowRunner, createStepsCompleter, defineFlow } from 'effectively-once';
import { createIdempotency } from 'effectively-once/http';
import { createCharge } from '../../../kit/provider/client.js';
import { startProvider } from '../../../kit/provider/provider.js';
import { createTestDatabase } from '../../helpers/db.js';

describe('attack35: steps attacks that held', () => {
  it('two tenants, one key: two flows, two charges', async () => {
    const db = await createTestDatabase('a35_tenants');
    const provider = await startProvider();
    const idempotency = createIdempotency({
      pool: db.pool,
      schema: db.schema,
      scope: (request) => request.headers.get('x-tenant') ?? 'none',
    });
    try {
      const flow = defineFlow<{ cents: number }>('charge', async (input, run) => {
        const charge = await run.call('charge', (key, signal) =>
          createCharge(provider.url, { amount: input.cents }, { idempotencyKey: key, signal }),
        );
        return { status: 201, body: { charge: charge.id } };
      });
      const route = idempotency.steps(flow);
      const key = randomUUID();
      const post = (tenant: string): Promise<Response> =>
        route(
          new Request('http://localhost/charges', {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'idempotency-key': key,
              'x-tenant': tenant,
            },
            body: JSON.stringify({ cents: 100 }),
          }),
        );
      const a = await post('tenant-a');
      const b = await post('tenant-b');
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(b.headers.get('idempotent-replayed')).toBeNull();
      const [ca, cb] = [
        (await a.json()) as { charge: string },
        (await b.json()) as { charge: string },
      ];
      expect(ca.charge).not.toBe(cb.charge);
      expect([...provider.appliedByKey().values()]).toEqual([1, 1]);
    } finally {
      await idempotency.close();
      await provider.close();
      await db.close();
    }
  });

  it('a retry racing the completer over an abandoned flow: one owner, one charge, one answer', async () => {
    const db = await createTestDatabase('a35_race');
    const provider = await startProvider();
    try {
      let failFirst = true;
      const flow = defineFlow<{ cents: number }>('charge', async (input, run) => {
        await run.step('order', () => input.cents);
        const charge = await run.call('charge', (key, signal) => {
          if (failFirst) {
            failFirst = false;
            throw new Error('network');
          }
          return createCharge(
            provider.url,
            { amount: input.cents },
            { idempotencyKey: key, signal },
          );
        });
        return { status: 201, body: { charge: charge.id, fence: run.fence } };
      });
      const options = { pool: db.pool, schema: db.schema, leaseMs: 200 };
      const runner = createFlowRunner(options);
      const start = { scope: 's', key: randomUUID(), input: { cents: 9 } };
      // The first run stops at its recovery point (the call's transient failure): released.
      expect(await runner.run(flow, start)).toMatchObject({ kind: 'retry' });
      const completer = createStepsCompleter({ ...options, flows: [flow] });
      const [retried, completed] = await Promise.all([
        // The retry waits for a live owner (as the HTTP door does, lockTimeoutMs).
        runner.run(flow, { ...start, waitMs: 5_000 }),
        completer.runOnce(),
      ]);
      expect(retried.kind).toBe('answered');
      const replay = await runner.run(flow, start);
      expect(replay).toMatchObject({ kind: 'answered', replayed: true });
      if (retried.kind === 'answered' && replay.kind === 'answered')
        expect(retried.answer.body).toEqual(replay.answer.body);
      expect(completed).toBeLessThanOrEqual(1);
      expect([...provider.appliedByKey().values()]).toEqual([1]);
    } finally {
      await provider.close();
      await db.close();
    }
  });
});
