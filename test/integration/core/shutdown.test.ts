import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { createConsumer } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('shutdown');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges; DROP TABLE IF EXISTS processed_messages');
});

describe('stop()', () => {
  it('with work in flight: every ack has its commit and nothing committed is left unacked; a restart finishes the rest once', async () => {
    const h = await memoryHarness(db, {
      concurrency: 8,
      after: async () => sleep(5 + Math.random() * 40),
    });
    const messages = Array.from({ length: 120 }, (_, i) =>
      h.source.send({ id: `m${i}`, amount: i }, { key: `m${i}` }),
    );
    await h.consumer.start();
    await waitFor(() => h.consumer.stats().processed >= 20, { what: '20 processed' });
    await h.consumer.stop();

    const committed = new Set((await h.effects()).map((e) => e.id));
    const acked = new Set(messages.filter((m) => m.state === 'acked').map((m) => m.body.id));
    expect(committed).toEqual(acked);
    expect(acked.size).toBeGreaterThanOrEqual(20);
    expect(acked.size).toBeLessThan(messages.length);
    expect(messages.filter((m) => m.state === 'in-flight')).toEqual([]);
    expect(h.consumer.stats().inFlight).toBe(0);

    const restarted = createConsumer<Charge>({
      name: 'charges',
      source: h.source,
      pool: db.pool,
      schema: db.schema,
      handler: async (m, ctx) => {
        await ctx.tx.query('INSERT INTO charges (id, amount) VALUES ($1, $2)', [m.id, m.amount]);
      },
    });
    await restarted.start();
    await waitFor(() => h.source.outstanding === 0, { what: 'the rest processed' });
    await restarted.stop();
    const effects = await h.effects();
    expect(effects).toHaveLength(messages.length);
    expect(new Set(effects.map((e) => e.id)).size).toBe(messages.length);
  });

  it('after the grace period aborts handlers, rolls them back and releases their deliveries unacked', async () => {
    let started = 0;
    const h = await memoryHarness(db, {
      concurrency: 3,
      after: async (_m, ctx) => {
        started++;
        await new Promise<void>((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
        });
      },
    });
    const messages = Array.from({ length: 3 }, (_, i) =>
      h.source.send({ id: `s${i}`, amount: i }, { key: `s${i}` }),
    );
    await h.consumer.start();
    await waitFor(() => started === 3, { what: 'three handlers running' });
    const began = Date.now();
    await h.consumer.stop({ timeoutMs: 200 });
    expect(Date.now() - began).toBeGreaterThanOrEqual(190);
    expect(messages.map((m) => m.state)).toEqual(['queued', 'queued', 'queued']);
    expect(messages.map((m) => m.attempts)).toEqual([0, 0, 0]); // released, not counted as attempts
    expect(h.consumer.stats().released).toBe(3);
    expect(await h.effects()).toEqual([]);
  });
});
