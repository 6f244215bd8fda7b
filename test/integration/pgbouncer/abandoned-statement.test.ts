/**
 * A handler given up on at `handlerTimeoutMs` while its statement still runs, through
 * PgBouncer in transaction mode. The library cancels the statement (the protocol's
 * CancelRequest with the connection's key) and destroys the connection. Through
 * PgBouncer both reach the pooler, not the server: a cancel that arrives after the
 * client is gone names a key PgBouncer has forgotten, and the server session keeps
 * running the statement, and holding the claim's row lock, until it ends by itself, so
 * the retry cannot claim the key.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { EffectivelyOnceError } from '../../../src/index.js';
import { createTestDatabase, directDatabaseUrl, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
const pids: number[] = [];
const stops: Array<() => Promise<void>> = [];
beforeAll(async () => {
  db = await createTestDatabase('pgbouncer_abandoned');
});
afterAll(async () => db.close());
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  // A statement the library failed to cancel would outlive the test: end it on the server.
  const admin = new pg.Client({ connectionString: directDatabaseUrl() });
  await admin.connect();
  await admin.query('SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid', [
    pids.splice(0),
  ]);
  await admin.end();
});

describe('a handler given up on through PgBouncer', () => {
  it.each([
    ['awaited', false],
    ['left floating', true],
  ])(
    'with its statement %s: the statement is cancelled on the server, the retry applies the effect once',
    async (_shape, floating) => {
      const failures: EffectivelyOnceError[] = [];
      const h = await memoryHarness(db, {
        handlerTimeoutMs: 500,
        lockTimeoutMs: 1000,
        after: async (_m, ctx) => {
          if (pids.length > 0) return;
          const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          pids.push(rows[0]!.pid);
          const sleep = ctx.tx.query('SELECT pg_sleep(600)');
          if (floating) void sleep.catch(() => undefined);
          else await sleep;
        },
      });
      h.consumer.on('failed', (f) => failures.push(f.error));
      stops.push(() => h.consumer.stop({ timeoutMs: 200 }));
      const key = `abandoned ${String(floating)}`;
      await db.pool.query('TRUNCATE charges');
      const message = h.source.send({ id: key, amount: 1 }, { key });
      await h.consumer.start();
      await waitFor(() => message.state === 'acked', { timeoutMs: 20_000, what: 'the retry' });
      expect(failures.map((e) => e.code)).toEqual(['EO_HANDLER_TIMEOUT']);
      expect(message.outcomes).toEqual(['retry', 'processed']);
      expect(await h.effects()).toEqual([{ id: key, amount: 1 }]);
    },
  );
});
