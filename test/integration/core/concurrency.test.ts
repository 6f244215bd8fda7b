import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('concurrency', { max: 40 });
});
afterAll(async () => db.close());

describe('concurrent deliveries of one key', () => {
  it('applies the effect once when 20 deliveries of one key race on separate connections', async () => {
    const pids = new Set<number>();
    let blockedSeen = 0;
    const blockedClaims = async () =>
      (
        await db.pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO%processed_messages%'",
        )
      ).rows[0]!.n;
    const h = await memoryHarness(db, {
      concurrency: 20,
      after: async (_m, ctx) => {
        const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        pids.add(rows[0]!.pid);
        // Hold the claim until the other deliveries are really queued behind it in Postgres.
        blockedSeen = await waitFor(
          async () => ((await blockedClaims()) >= 10 ? blockedClaims() : 0),
          {
            what: 'claims blocked behind the first',
          },
        );
      },
    });
    const messages = Array.from({ length: 20 }, () =>
      h.source.send({ id: 'order-1', amount: 42 }, { key: 'order-1' }),
    );
    await h.consumer.start();
    await waitFor(() => h.source.outstanding === 0, { what: 'all 20 deliveries settled' });
    await h.consumer.stop();

    expect(await h.effects()).toEqual([{ id: 'order-1', amount: 42 }]);
    const stats = h.consumer.stats();
    expect(stats.processed).toBe(1);
    expect(stats.duplicates).toBe(19);
    expect(messages.every((m) => m.state === 'acked')).toBe(true);
    expect(pids.size).toBe(1);
    expect(blockedSeen).toBeGreaterThanOrEqual(10);
  });

  it('retries a claim blocked past lockTimeoutMs and never acks it while the first is open', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let firstStarted = false;
    const h = await memoryHarness(db, {
      name: 'blocked',
      concurrency: 4,
      lockTimeoutMs: 150,
      busyRetryDelayMs: 50,
      after: async (m) => {
        if (m.amount === 1) {
          firstStarted = true;
          await gate;
        }
      },
    });
    await db.pool.query('TRUNCATE charges');
    await h.consumer.start();
    const first = h.source.send({ id: 'k', amount: 1 }, { key: 'k', payload: 'same' });
    await waitFor(() => firstStarted, { what: 'first handler running' });
    const second = h.source.send({ id: 'k', amount: 2 }, { key: 'k', payload: 'same' });
    await waitFor(() => h.consumer.stats().busy >= 2, {
      what: 'the second claim to time out twice',
    });
    expect(second.state).not.toBe('acked');
    expect(second.outcomes.every((o) => o === 'retry')).toBe(true);
    expect(first.state).toBe('in-flight');

    release();
    await waitFor(() => first.state === 'acked' && second.state === 'acked', {
      what: 'both acked',
    });
    await h.consumer.stop();
    expect(await h.effects()).toEqual([{ id: 'k', amount: 1 }]);
    expect(second.outcomes.at(-1)).toBe('duplicate');
  });
});
