/**
 * Issue 11: the consumer's life cycle under database trouble. A failed start() can be
 * retried; stop() during start() leaves no source running; stop() does not hang on a
 * pool with no free connection; a timed-out handler's server backend is cancelled so
 * it stops holding the claim's row lock.
 */
import { migrationLockKeys } from '../../../src/store/migrator.js';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { FaultProxy } from '../../../kit/fault-proxy.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { ManualSource } from '../../helpers/manual-source.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { sleep, waitFor, within } from '../../helpers/wait-for.js';

let db: TestDatabase;
const cleanups: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await createTestDatabase('lifecycle_faults');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges, processed_messages, pm_stop_start');
  await db.pool.query('CREATE TABLE charges (id text NOT NULL, amount int NOT NULL)');
});
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A second pool on the test schema, for tests that need a small or a proxied one. */
function extraPool(options: pg.PoolConfig = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl(),
    options: `-c search_path=${db.schema}`,
    ...options,
  });
  pool.on('error', () => undefined);
  cleanups.push(() => pool.end().catch(() => undefined));
  return pool;
}

describe('start()', () => {
  it('a start() that rejected (Postgres unreachable during migrate) can be called again and then runs', async () => {
    const url = new URL(databaseUrl());
    const proxy = await FaultProxy.create({
      target: { host: url.hostname, port: Number(url.port) },
    });
    cleanups.push(() => proxy.down());
    url.port = String(proxy.port);
    const pool = extraPool({ connectionString: url.toString(), connectionTimeoutMillis: 2000 });
    const source = memorySource<Charge>();
    const consumer = createConsumer<Charge>({
      name: 'restart',
      source,
      pool,
      schema: db.schema,
      handler: async (m, ctx) => {
        await ctx.tx.query('INSERT INTO charges (id, amount) VALUES ($1, $2)', [m.id, m.amount]);
      },
    });
    cleanups.push(() => consumer.stop({ timeoutMs: 2000 }));
    await expect(consumer.start()).rejects.toBeInstanceOf(Error);

    await proxy.up();
    await expect(consumer.start()).resolves.toBeUndefined();
    const message = source.send({ id: 'after-restart', amount: 1 }, { key: 'after-restart' });
    await waitFor(() => message.state === 'acked', { what: 'processed after the second start' });
    const { rows } = await db.pool.query('SELECT id FROM charges');
    expect(rows).toEqual([{ id: 'after-restart' }]);
  });
});

describe('stop() while start() is still migrating', () => {
  it('once both settle, the source was never run, or was run and stopped before stop() resolved', async () => {
    // The advisory lock a migration of the table takes around each step (src/store/migrator.ts).
    const lockKeys = migrationLockKeys('consumer', { schema: db.schema, table: 'pm_stop_start' });
    const locker = await db.pool.connect();
    let lockHeld = true;
    const unlock = async () => {
      if (!lockHeld) return;
      lockHeld = false;
      await locker.query('COMMIT');
      locker.release();
    };
    cleanups.push(unlock);
    await locker.query('BEGIN');
    await locker.query('SELECT pg_advisory_xact_lock($1, $2)', lockKeys);

    const source = new ManualSource<Charge>();
    const consumer = createConsumer<Charge>({
      name: 'stop-during-start',
      source,
      pool: db.pool,
      schema: db.schema,
      table: 'pm_stop_start',
      handler: async () => undefined,
    });
    const starting = consumer.start();
    await waitFor(
      async () =>
        (
          await db.pool.query(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1::bigint::oid AND objsubid = 2",
            [lockKeys[1] >>> 0],
          )
        ).rowCount === 1,
      { what: 'migrate() waiting for its lock' },
    );
    const stopping = consumer.stop({ timeoutMs: 1000 });
    // Let stop() get as far as it goes while start() is stuck, then let migrate() finish.
    await within(stopping, 500);
    await unlock();
    const [started, stopped] = await Promise.allSettled([starting, stopping]);
    expect(stopped.status).toBe('fulfilled');
    expect(['rejected', 'fulfilled']).toContain(started.status);
    await sleep(200); // anything start() still had to do has had time to happen
    expect([[], ['close'], ['run-start', 'run-end', 'close']]).toContainEqual(source.events);
    expect(consumer.stats().received).toBe(0);
  });
});

describe('a pool with no free connection', () => {
  it('stop() does not hang: after the grace period the delivery waiting for a connection is released', async () => {
    const pool = extraPool({ max: 2 });
    const h = await memoryHarness(db, { pool, concurrency: 1 });
    await h.consumer.start();
    // Another part of the app holds every connection of the pool.
    const held = [await pool.connect(), await pool.connect()];
    cleanups.push(async () => held.splice(0).forEach((c) => c.release()));
    const message = h.source.send({ id: 'starved', amount: 1 }, { key: 'starved' });
    await waitFor(() => message.state === 'in-flight', {
      what: 'delivery waiting for a connection',
    });

    const stopped = await within(h.consumer.stop({ timeoutMs: 300 }), 20_000);
    expect(stopped).not.toBe('hung');
    expect(message.outcomes).toEqual(['released']);
    expect(message.state).toBe('queued');
    held.splice(0).forEach((c) => c.release());
    expect(await h.effects()).toEqual([]);
  });
});

describe('a handler that outlives handlerTimeoutMs', () => {
  it('has its server backend cancelled, so a redelivery can claim the key long before its pg_sleep would end', async () => {
    const pids: number[] = [];
    cleanups.push(async () => {
      for (const pid of pids)
        await db.pool.query('SELECT pg_terminate_backend($1)', [pid]).catch(() => undefined);
    });
    const h = await memoryHarness(db, {
      handlerTimeoutMs: 500,
      lockTimeoutMs: 500,
      busyRetryDelayMs: 50,
      before: async (_m, ctx) => {
        if (pids.length > 0) return;
        const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        pids.push(rows[0]!.pid);
        await ctx.tx.query('SELECT pg_sleep(600)').catch(() => undefined);
      },
    });
    const message = h.source.send({ id: 'slow', amount: 9 }, { key: 'slow' });
    await h.consumer.start();
    try {
      await waitFor(() => pids.length === 1 && message.outcomes.length > 0, {
        what: 'the first attempt timed out',
      });
      await waitFor(
        async () =>
          (
            await db.pool.query(
              "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
              [pids[0]],
            )
          ).rowCount === 0,
        { timeoutMs: 20_000, what: "the timed-out handler's backend to stop running pg_sleep" },
      );
      await waitFor(() => message.state === 'acked', {
        timeoutMs: 30_000,
        what: 'the redelivery processed',
      });
    } finally {
      await h.consumer.stop({ timeoutMs: 2000 });
    }
    expect(message.outcomes[0]).toBe('retry');
    expect(message.outcomes.at(-1)).toBe('processed');
    expect(await h.effects()).toEqual([{ id: 'slow', amount: 9 }]);
  });
});
