/**
 * A handler that returns while a statement it sent through `ctx.tx` has not been
 * answered (a floating `tx.query`, an un-awaited helper), in each shape pg takes:
 * a promise, a callback in the query config object, a submittable (`pg.Query`).
 *
 * `ctx.tx` ends when the handler settles and the COMMIT waits for the floating
 * statement, so that wait is still the handler's work: bounded by `handlerTimeoutMs`
 * and given up on at `stop()`'s hard stop, as for a handler that ignores its signal.
 * And a query chained after it (sent once `ctx.tx` ended) is refused before COMMIT,
 * whatever shape the first one had: the delivery fails, nothing commits.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { EffectivelyOnceError } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor, within } from '../../helpers/wait-for.js';

let db: TestDatabase;
const cleanups: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await createTestDatabase('floating_statements');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges, processed_messages, ledger');
  await db.pool.query('CREATE TABLE ledger (id text NOT NULL, note text NOT NULL)');
});
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

type Send = (tx: pg.PoolClient, sql: string, then: () => void) => void;

/** The shapes of a query the handler does not wait for; `then` runs once it is answered. */
const shapes: Array<[string, Send]> = [
  ['a promise', (tx, sql, then) => void tx.query(sql).then(then, then)],
  [
    'a callback in the config object',
    (tx, sql, then) => void tx.query({ text: sql, callback: then } as pg.QueryConfig),
  ],
  ['a submittable (pg.Query)', (tx, sql, then) => void tx.query(new pg.Query(sql, [], then))],
];

const modes: Array<[string, object]> = [
  ['per message', {}],
  ['batch mode', { batch: { maxSize: 10, maxWaitMs: 5 } }],
];

/** Leaves a statement running that does not end by itself, as `send` sends it. */
async function floatSleep(tx: pg.PoolClient, send: Send, pids: number[]): Promise<void> {
  const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const pid = rows[0]!.pid;
  pids.push(pid);
  cleanups.push(async () => {
    await db.pool.query('SELECT pg_terminate_backend($1)', [pid]).catch(() => undefined);
  });
  send(tx, 'SELECT pg_sleep(600)', () => undefined);
}

describe.each(modes)('%s: a handler returns with a statement still running', (mode, extra) => {
  it.each(shapes)('(%s) given up on at handlerTimeoutMs, then retried', async (shape, send) => {
    const pids: number[] = [];
    const failures: EffectivelyOnceError[] = [];
    const h = await memoryHarness(db, {
      ...extra,
      handlerTimeoutMs: 500,
      lockTimeoutMs: 1000,
      after: async (_m, ctx) => {
        if (pids.length === 0) await floatSleep(ctx.tx, send, pids);
      },
    });
    h.consumer.on('failed', (f) => failures.push(f.error));
    cleanups.push(() => h.consumer.stop({ timeoutMs: 200 }));
    const key = `${mode} ${shape}`;
    const message = h.source.send({ id: key, amount: 1 }, { key });
    await h.consumer.start();
    await waitFor(() => message.state === 'acked', { timeoutMs: 20_000, what: 'the retry' });
    expect(failures.map((e) => e.code)).toEqual(['EO_HANDLER_TIMEOUT']);
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(await h.effects()).toEqual([{ id: key, amount: 1 }]);
  });

  it.each(shapes)(
    '(%s) timeouts off: stop() resolves after its grace period',
    async (shape, send) => {
      const pids: number[] = [];
      const h = await memoryHarness(db, {
        ...extra,
        handlerTimeoutMs: 0,
        after: async (_m, ctx) => floatSleep(ctx.tx, send, pids),
      });
      const key = `${mode} ${shape}`;
      const message = h.source.send({ id: key, amount: 1 }, { key });
      await h.consumer.start();
      await waitFor(() => pids.length === 1, { what: 'the handler running' });
      expect(await within(h.consumer.stop({ timeoutMs: 200 }), 15_000)).not.toBe('hung');
      expect(message.outcomes).toEqual(['released']);
      expect(await h.effects()).toEqual([]);
    },
  );
});

describe.each(modes)('%s: a query chained after one left floating', (_mode, extra) => {
  it.each(shapes)(
    '(%s) is refused before COMMIT: the delivery fails, nothing commits',
    async (_shape, send) => {
      const failures: EffectivelyOnceError[] = [];
      const h = await memoryHarness(db, {
        ...extra,
        maxAttempts: 1,
        after: async (m, ctx) =>
          send(ctx.tx, 'SELECT pg_sleep(0.05)', () => {
            ctx.tx
              .query('INSERT INTO ledger VALUES ($1, $2)', [m.id, 'late'])
              .catch(() => undefined);
          }),
      });
      h.consumer.on('failed', (f) => failures.push(f.error));
      const message = h.source.send({ id: 'chained', amount: 1 }, { key: 'chained' });
      await h.consumer.start();
      try {
        await waitFor(() => message.state === 'acked' || message.state === 'dead-lettered', {
          what: 'the delivery settled',
        });
      } finally {
        await h.consumer.stop();
      }
      expect(failures.map((e) => e.code)).toEqual(['EO_TX_CONTROL']);
      expect(message.state).toBe('dead-lettered');
      expect(await h.effects()).toEqual([]);
      expect((await db.pool.query('SELECT * FROM ledger')).rows).toEqual([]);
    },
  );
});
