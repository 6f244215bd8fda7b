/**
 * Issue 32, defect 3's audit: each failure a message's own handling causes spends an
 * attempt (and is dead-lettered after `maxAttempts`), while the database's own trouble
 * stays infrastructure. The server timeouts and the read-only transaction are in
 * session-timeouts.test.ts; these are the codes that already reach the runner as a
 * statement error on a live session.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate, type EffectivelyOnceError } from '../../../src/index.js';
import type { HandlerContext } from '../../../src/index.js';
import type { MemoryMessage } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { codesOf } from '../../helpers/manual-source.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('message_caused');
  await db.pool.query(
    "CREATE TABLE IF NOT EXISTS held (id text PRIMARY KEY); INSERT INTO held VALUES ('x') ON CONFLICT DO NOTHING",
  );
});
afterAll(async () => db.close());

type Failure = { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };

const settled = (m: MemoryMessage<Charge>) => m.state === 'acked' || m.state === 'dead-lettered';

async function settledOrLooping(m: MemoryMessage<Charge>, failures: Failure[], bound = 6) {
  await waitFor(
    () => settled(m) || failures.filter((f) => f.key === m.options.key).length >= bound,
    { timeoutMs: 30_000, what: `message ${m.options.key} settled or looping` },
  );
}

/** Runs `staged` in a handler (maxAttempts 2) until its message settles or loops. */
async function dead(
  name: string,
  staged: (ctx: HandlerContext<Charge>) => Promise<void>,
): Promise<{ failures: Failure[]; message: MemoryMessage<Charge> }> {
  const failures: Failure[] = [];
  const h = await memoryHarness(db, {
    name,
    maxAttempts: 2,
    after: async (_m, ctx) => staged(ctx),
  });
  h.consumer.on('failed', (f) => failures.push(f));
  await h.consumer.start();
  try {
    const message = h.source.send({ id: name, amount: 1 }, { key: name });
    await settledOrLooping(message, failures);
    return { failures, message };
  } finally {
    await h.consumer.stop();
  }
}

async function swallow(run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch {
    // the handler goes on, as if the statement were optional
  }
}

describe('statement errors the handler causes spend attempts', () => {
  const sleepPastStatementTimeout = (ctx: HandlerContext<Charge>) =>
    ctx.tx.query("SET LOCAL statement_timeout = '50ms'; SELECT pg_sleep(5)");
  /** The row 'x' of `held` is locked by another session; the handler waits for it. */
  const waitPastLockTimeout = async (ctx: HandlerContext<Charge>) =>
    ctx.tx.query("SET LOCAL lock_timeout = '50ms'; SELECT * FROM held WHERE id = 'x' FOR UPDATE");

  it.each([
    ['statement_timeout (57014), rethrown', 'st-throw', sleepPastStatementTimeout, false],
    ['statement_timeout (57014), caught', 'st-catch', sleepPastStatementTimeout, true],
    ['lock_timeout (55P03), rethrown', 'lt-throw', waitPastLockTimeout, false],
    ['lock_timeout (55P03), caught', 'lt-catch', waitPastLockTimeout, true],
  ])(
    '%s: attempts spent, dead-lettered, never EO_CLAIM_BUSY',
    async (_what, name, staged, caught) => {
      const holder = await db.pool.connect();
      try {
        await holder.query("BEGIN; SELECT * FROM held WHERE id = 'x' FOR UPDATE");
        const { failures, message } = await dead(name, async (ctx) => {
          if (caught) await swallow(() => staged(ctx));
          else await staged(ctx);
        });
        expect(message.state).toBe('dead-lettered');
        expect(failures.map((f) => [f.attempt, f.willRetry])).toEqual([
          [1, true],
          [2, false],
        ]);
        for (const f of failures) expect(f.error.code).not.toBe('EO_CLAIM_BUSY');
      } finally {
        await holder.query('ROLLBACK');
        holder.release();
      }
    },
  );
});

describe('the database refusing connections stays infrastructure', () => {
  it("'too many connections' (53300): no attempt spent, processed once connections come back", async () => {
    const role = `eo_limited_${randomBytes(3).toString('hex')}`;
    await db.pool.query(
      `CREATE ROLE ${role} LOGIN; GRANT ALL ON SCHEMA ${db.schema} TO ${role};` +
        ` ALTER DEFAULT PRIVILEGES IN SCHEMA ${db.schema} GRANT ALL ON TABLES TO ${role}`,
    );
    const url = new URL(databaseUrl());
    url.username = role;
    url.password = '';
    const limited = new pg.Pool({
      connectionString: url.toString(),
      max: 3,
      idleTimeoutMillis: 50,
      options: `-c search_path=${db.schema}`,
    });
    limited.on('error', () => undefined);
    const failures: Failure[] = [];
    const h = await memoryHarness(db, { name: 'limited', pool: limited, maxAttempts: 1 });
    h.consumer.on('failed', (f) => failures.push(f));
    try {
      // Migrated by the test's own role: this one may not create schemas.
      await migrate(db.pool, { schema: db.schema });
      await db.pool.query(`GRANT ALL ON ALL TABLES IN SCHEMA ${db.schema} TO ${role}`);
      await h.consumer.start();
      await db.pool.query(`ALTER ROLE ${role} CONNECTION LIMIT 0`);
      await db.pool.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1',
        [role],
      );
      await waitFor(() => limited.totalCount === 0, { what: 'no connection of the role left' });
      const message = h.source.send({ id: 'limited', amount: 1 }, { key: 'limited' });
      await waitFor(() => failures.length >= 1, { what: 'a refused delivery' });
      await db.pool.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`);
      await waitFor(() => settled(message), { what: 'processed once connections are back' });
      expect(message.state).toBe('acked');
      expect(failures.every((f) => f.willRetry)).toBe(true);
      expect(codesOf(failures[0]!.error.cause)).toContain('53300');
      expect((await h.effects()).filter((e) => e.id === 'limited')).toHaveLength(1);
    } finally {
      await h.consumer.stop();
      await limited.end();
      await db.pool.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`).catch(() => undefined);
    }
  });
});
