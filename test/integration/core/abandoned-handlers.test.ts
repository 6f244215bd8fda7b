/**
 * Handlers the library gives up on: past their timeout (issue 20, defect 5) and at a
 * shutdown's hard stop (issue 20, defect 9; issue 27's `stop()` item). Both doors, the
 * consumer and the HTTP core, share one path (`ClaimConnection`): the handler's
 * statement is cancelled on the server with the protocol's CancelRequest on a socket of
 * its own, outside the pool, and its connection destroyed; nothing waits for the cancel.
 *
 * With a saturated pool (the usual state when handlers time out) the old cancel waited
 * 5 s for a free pool connection, never got one, and the backend went on running and
 * holding the key's row lock: the retry was refused (409) or found the claim busy.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createIdempotency } from '../../../src/http/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor, within } from '../../helpers/wait-for.js';

let db: TestDatabase;
const cleanups: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await createTestDatabase('abandoned_handlers');
  await db.pool.query('CREATE TABLE effects (k text NOT NULL)');
});
afterAll(async () => db.close());
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A pool of `max` connections on the test schema, one of them held by "the rest of the app". */
async function saturatedPool(max: number): Promise<pg.Pool> {
  const pool = new pg.Pool({
    connectionString: databaseUrl(),
    options: `-c search_path=${db.schema}`,
    max,
  });
  pool.on('error', () => undefined);
  cleanups.push(() => pool.end().catch(() => undefined));
  const held = await Promise.all(Array.from({ length: max - 1 }, () => pool.connect()));
  cleanups.push(async () => held.forEach((c) => c.release()));
  return pool;
}

/** Backends to kill after the test whatever happened (a handler's pg_sleep must not outlive it). */
function track(pids: number[]): void {
  cleanups.push(async () => {
    for (const pid of pids)
      await db.pool.query('SELECT pg_terminate_backend($1)', [pid]).catch(() => undefined);
  });
}

async function backendGone(pid: number, what: string): Promise<void> {
  await waitFor(
    async () =>
      (await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount === 0,
    { timeoutMs: 20_000, what },
  );
}

async function sleepingHandlerPid(tx: pg.PoolClient, pids: number[]): Promise<void> {
  const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  pids.push(rows[0]!.pid);
  await tx.query('SELECT pg_sleep(600)');
}

const request = (key: string) =>
  new Request('http://localhost/things', {
    method: 'POST',
    headers: { 'idempotency-key': key },
    body: '{}',
  });

describe('a timed-out handler, with every other pool connection taken', () => {
  it('HTTP: answered 503 without waiting for a connection; its backend is cancelled, so the retry runs (not 409)', async () => {
    const pool = await saturatedPool(2);
    const idempotency = createIdempotency({
      pool,
      scope: 'abandon',
      schema: db.schema,
      retention: false,
      handlerTimeoutMs: 300,
      lockTimeoutMs: 3000,
    });
    cleanups.push(() => idempotency.close({ timeoutMs: 1000 }));
    const key = randomUUID();
    const pids: number[] = [];
    track(pids);
    const first = await idempotency.handle(request(key), async (_r, { tx }) => {
      await sleepingHandlerPid(tx, pids);
      return new Response('late', { status: 201 });
    });
    expect(first.status).toBe(503);
    expect(await first.json()).toMatchObject({ code: 'EO_HANDLER_TIMEOUT' });
    // The retry waits up to lockTimeoutMs on the key's row lock: freed only when the backend stops.
    const retry = await idempotency.handle(request(key), async (_r, { tx }) => {
      await tx.query('INSERT INTO effects (k) VALUES ($1)', [key]);
      return new Response('done', { status: 201 });
    });
    expect(retry.status).toBe(201);
    await backendGone(pids[0]!, 'the timed-out request’s backend to end');
    expect((await db.pool.query('SELECT 1 FROM effects WHERE k = $1', [key])).rowCount).toBe(1);
  });

  it('consumer: retried without waiting for a connection; its backend is cancelled, so the redelivery claims the key', async () => {
    const pool = await saturatedPool(2);
    const pids: number[] = [];
    track(pids);
    const h = await memoryHarness(db, {
      pool,
      concurrency: 1,
      handlerTimeoutMs: 300,
      lockTimeoutMs: 500,
      before: async (_m, ctx) => {
        if (pids.length === 0) await sleepingHandlerPid(ctx.tx, pids);
      },
    });
    cleanups.push(() => h.consumer.stop({ timeoutMs: 1000 }));
    const message = h.source.send({ id: 'slow', amount: 1 }, { key: 'slow' });
    await h.consumer.start();
    await waitFor(() => message.state === 'acked', {
      timeoutMs: 20_000,
      what: 'the redelivery processed',
    });
    expect(message.outcomes).toEqual(['retry', 'processed']);
    await backendGone(pids[0]!, 'the timed-out handler’s backend to end');
    expect(await h.effects()).toEqual([{ id: 'slow', amount: 1 }]);
  });
});

/** How a handler that ignores its signal stays busy: in a statement, or in its own code. */
const stuck: Array<[string, (tx: pg.PoolClient, pids: number[]) => Promise<void>]> = [
  ['in a statement', (tx, pids) => sleepingHandlerPid(tx, pids)],
  ['in its own code', () => new Promise<void>(() => undefined)],
];

describe.each(stuck)('timeouts off, a handler that ignores its signal, stuck %s', (how, hang) => {
  it('HTTP: close() resolves after its grace period; the request is answered 503 and its key is free', async () => {
    const idempotency = createIdempotency({
      pool: db.pool,
      scope: `stop-${how}`,
      schema: db.schema,
      retention: false,
      handlerTimeoutMs: 0,
      lockTimeoutMs: 3000,
    });
    const key = randomUUID();
    const pids: number[] = [];
    track(pids);
    let started = false;
    const answer = idempotency.handle(request(key), async (_r, { tx }) => {
      started = true;
      await hang(tx, pids);
      return new Response('late', { status: 201 });
    });
    await waitFor(() => started && (how !== 'in a statement' || pids.length === 1), {
      what: 'the handler running',
    });
    expect(await within(idempotency.close({ timeoutMs: 200 }), 15_000)).not.toBe('hung');
    const response = await within(answer, 5000);
    expect(response).not.toBe('hung');
    expect((response as Response).status).toBe(503);
    if (pids[0] !== undefined) await backendGone(pids[0], 'the stopped request’s backend to end');
    // Another instance (the next deploy) runs the retry at once: nothing holds the key.
    const next = createIdempotency({
      pool: db.pool,
      scope: `stop-${how}`,
      schema: db.schema,
      retention: false,
      lockTimeoutMs: 3000,
    });
    cleanups.push(() => next.close());
    const retry = await next.handle(request(key), async () => new Response('ok', { status: 201 }));
    expect(retry.status).toBe(201);
  });

  it.each([
    ['per message', {}],
    ['batch mode', { batch: { maxSize: 10, maxWaitMs: 5 } }],
  ])(
    'consumer (%s): stop() resolves after its grace period; the delivery is released, its backend gone',
    async (_mode, extra) => {
      const pids: number[] = [];
      track(pids);
      let started = false;
      const h = await memoryHarness(db, {
        ...extra,
        name: `stop-${how}`,
        handlerTimeoutMs: 0,
        before: async (_m, ctx) => {
          started = true;
          await hang(ctx.tx, pids);
        },
      });
      const message = h.source.send({ id: 'stuck', amount: 1 }, { key: `stuck-${how}` });
      await h.consumer.start();
      await waitFor(() => started && (how !== 'in a statement' || pids.length === 1), {
        what: 'the handler running',
      });
      expect(await within(h.consumer.stop({ timeoutMs: 200 }), 15_000)).not.toBe('hung');
      expect(message.outcomes).toEqual(['released']);
      expect(message.state).toBe('queued');
      if (pids[0] !== undefined) await backendGone(pids[0], 'the stopped handler’s backend to end');
      expect((await h.effects()).filter((e) => e.id === 'stuck')).toEqual([]);
    },
  );
});
