/**
 * Issue 27, defect 1: `ctx.tx` ends when the handler's promise settles, not when the
 * COMMIT finishes. A handler that leaves a query chain floating (`tx.query(a).then(() =>
 * tx.query(b))`, an un-awaited helper, `forEach(async …)`) must never get its late
 * query run in autocommit behind the COMMIT: queries sent before the handler settled
 * run inside the claim's transaction; later ones are refused, and when that happens
 * before COMMIT the delivery fails as the handler's fault (EO_TX_CONTROL).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import type { EffectivelyOnceError, HandlerContext } from '../../../src/index.js';
import type { MemoryMessage } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('floating_queries');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges, processed_messages, ledger, child, parent');
  await db.pool.query(`
    CREATE TABLE ledger (id text NOT NULL, note text NOT NULL);
    CREATE TABLE parent (id text PRIMARY KEY);
    CREATE TABLE child (id text PRIMARY KEY,
      parent_id text NOT NULL REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
    INSERT INTO parent VALUES ('p-ok')`);
});

type Failure = { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };
const settled = (m: MemoryMessage<Charge>) => m.state === 'acked' || m.state === 'dead-lettered';

async function ledger(): Promise<string[]> {
  const { rows } = await db.pool.query<{ note: string }>('SELECT note FROM ledger ORDER BY note');
  return rows.map((r) => r.note);
}

async function claims(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM processed_messages',
  );
  return rows[0]!.n;
}

/** Writes a ledger row after another statement, without awaiting either: a floating chain. */
function floatingChain(m: Charge, tx: pg.PoolClient): void {
  void tx
    .query('SELECT pg_sleep(0.05)')
    .then(() => tx.query('INSERT INTO ledger (id, note) VALUES ($1, $2)', [m.id, 'late']))
    .catch(() => undefined);
}

async function run(
  options: Parameters<typeof memoryHarness>[1],
  key = 'k',
): Promise<{ message: MemoryMessage<Charge>; failures: Failure[] }> {
  const failures: Failure[] = [];
  const h = await memoryHarness(db, options);
  h.consumer.on('failed', (f) => failures.push(f));
  const message = h.source.send({ id: key, amount: 1 }, { key });
  await h.consumer.start();
  try {
    await waitFor(() => settled(message) || failures.length >= 6, {
      timeoutMs: 30_000,
      what: 'settled or looping',
    });
  } finally {
    await h.consumer.stop();
  }
  return { message, failures };
}

describe.each([
  ['per message', {}],
  ['batch mode', { batch: { maxSize: 10, maxWaitMs: 20 } }],
])('a handler that leaves a query chain floating (%s)', (_mode, extra) => {
  it('and whose COMMIT fails (deferred FK): the late query never runs, in any attempt', async () => {
    const { message, failures } = await run({
      ...extra,
      maxAttempts: 2,
      after: async (m, ctx) => {
        await ctx.tx.query('INSERT INTO child (id, parent_id) VALUES ($1, $2)', [
          m.id,
          'p-missing',
        ]);
        floatingChain(m, ctx.tx);
      },
    });
    expect(message.state).toBe('dead-lettered');
    expect(failures.map((f) => f.willRetry)).toEqual([true, false]);
    expect(await ledger()).toEqual([]);
    expect(await claims()).toBe(0);
  });

  it('and whose COMMIT would succeed: refused loudly, the delivery fails as the handler’s (EO_TX_CONTROL); nothing outside the claim', async () => {
    const { message, failures } = await run({
      ...extra,
      maxAttempts: 2,
      after: async (m, ctx) => floatingChain(m, ctx.tx),
    });
    expect(message.state).toBe('dead-lettered');
    expect(failures.map((f) => f.error.code)).toEqual(['EO_TX_CONTROL', 'EO_TX_CONTROL']);
    expect(failures.map((f) => f.willRetry)).toEqual([true, false]);
    expect(await ledger()).toEqual([]);
    expect(await claims()).toBe(0);
  });

  it('forEach(async …): the first statements ran in the transaction, the later ones were refused; nothing committed', async () => {
    const refused: unknown[] = [];
    const { message, failures } = await run({
      ...extra,
      maxAttempts: 1,
      after: async (m, ctx: HandlerContext<Charge>) => {
        // The fault under test: a forEach(async …) whose promises nobody awaits.
        // eslint-disable-next-line @typescript-eslint/no-misused-promises
        ['a', 'b', 'c'].forEach(async (note) => {
          try {
            await ctx.tx.query('INSERT INTO ledger VALUES ($1, $2)', [m.id, `${note}-1`]);
            await ctx.tx.query('INSERT INTO ledger VALUES ($1, $2)', [m.id, `${note}-2`]);
          } catch (error) {
            refused.push((error as EffectivelyOnceError).code);
          }
        });
      },
    });
    expect(refused).toEqual(['EO_TX_CONTROL', 'EO_TX_CONTROL', 'EO_TX_CONTROL']);
    expect(message.state).toBe('dead-lettered');
    expect(failures.map((f) => f.error.code)).toEqual(['EO_TX_CONTROL']);
    expect(await ledger()).toEqual([]);
    expect(await claims()).toBe(0);
  });

  it('a query sent before the handler returned but not awaited still runs inside the claim’s transaction', async () => {
    const { message, failures } = await run({
      ...extra,
      after: async (m, ctx) => {
        void ctx.tx.query('INSERT INTO ledger (id, note) VALUES ($1, $2)', [m.id, 'unawaited']);
      },
    });
    expect(failures).toEqual([]);
    expect(message.outcomes).toEqual(['processed']);
    expect(await ledger()).toEqual(['unawaited']);
    expect(await claims()).toBe(1);
  });
});
