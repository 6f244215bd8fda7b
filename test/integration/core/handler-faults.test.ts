/**
 * Issue 11: handlers written the way people write them (a caught SQL error, a
 * transaction ended by hand, a deferred constraint, a downstream HTTP client's network
 * error, a serialization failure) must never get a message acked without its effect,
 * nor retried forever. Per-message mode; batch mode is in handler-faults-batch.test.ts.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { EffectivelyOnceError } from '../../../src/index.js';
import type { MemoryMessage } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { codesOf } from '../../helpers/manual-source.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('handler_faults');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query(
    'DROP TABLE IF EXISTS charges, processed_messages, taken, child, parent, accounts, counter, ledger',
  );
  // A row the handlers collide with: inserting 'taken' again raises 23505.
  await db.pool.query("CREATE TABLE taken (id text PRIMARY KEY); INSERT INTO taken VALUES ('x')");
});

type Failure = { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };

async function claimRows(key: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM processed_messages WHERE message_key = $1',
    [key],
  );
  return rows[0]!.n;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const settled = (m: MemoryMessage<Charge>) => m.state === 'acked' || m.state === 'dead-lettered';

/**
 * Waits until `message` is settled, or has failed `bound` times without settling (a
 * delivery retried forever): the assertions that follow then say which it was.
 */
async function settledOrLooping(
  message: MemoryMessage<Charge>,
  failures: Failure[],
  bound = 8,
): Promise<void> {
  await waitFor(
    () => settled(message) || failures.filter((f) => f.key === message.options.key).length >= bound,
    { timeoutMs: 30_000, what: `message ${message.options.key} settled or looping` },
  );
}

/** Inserts the colliding row and swallows the unique violation, as `ON CONFLICT` by hand. */
async function insertIgnoringDuplicate(tx: pg.PoolClient): Promise<void> {
  try {
    await tx.query("INSERT INTO taken (id) VALUES ('x')");
  } catch (error) {
    if ((error as { code?: string }).code !== '23505') throw error;
  }
}

describe('a handler that swallows a SQL error', () => {
  it('is not acked: fails with EO_TX_ABORTED naming the 23505, retries, then dead-letters; nothing committed', async () => {
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      maxAttempts: 2,
      after: async (_m, ctx) => insertIgnoringDuplicate(ctx.tx),
    });
    h.consumer.on('failed', (f) => failures.push(f));
    const message = h.source.send({ id: 's', amount: 1 }, { key: 's' });
    await h.consumer.start();
    try {
      await settledOrLooping(message, failures);
    } finally {
      await h.consumer.stop();
    }
    expect(message.state).toBe('dead-lettered');
    expect(message.outcomes).toEqual(['retry', 'dead-lettered']);
    expect(message.deadLetterReason?.code).toBe('EO_TX_ABORTED');
    expect(failures.map((f) => f.error.code)).toEqual(['EO_TX_ABORTED', 'EO_TX_ABORTED']);
    const first = failures[0]!.error;
    expect(first.retryable).toBe(true);
    expect((first.cause as { code?: string } | undefined)?.code).toBe('23505');
    expect(first.details.sqlstate).toBe('23505');
    expect(await h.effects()).toEqual([]);
    expect(await claimRows('s')).toBe(0);
  });

  it('a multi-statement string that ends the transaction ("SELECT 1; ROLLBACK") is refused; the effect written after it applies once', async () => {
    const refusals: string[] = [];
    const h = await memoryHarness(db, {
      maxAttempts: 2,
      before: async (_m, ctx) => {
        // Were it sent, the effect the harness writes next would autocommit, the runner
        // would find its claim gone and retry: the effect applied twice.
        await ctx.tx.query('SELECT 1; ROLLBACK').catch((error: unknown) => {
          refusals.push(codesOf(error)[0] ?? String(error));
        });
      },
    });
    const message = h.source.send({ id: 'e', amount: 1 }, { key: 'e' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(refusals).toEqual(['EO_TX_CONTROL']);
    expect(message.outcomes).toEqual(['processed']);
    expect(await h.effects()).toEqual([{ id: 'e', amount: 1 }]);
    expect(await claimRows('e')).toBe(1);
  });
});

describe('the transaction handed to the handler guards transaction control', () => {
  const forbidden = [
    'BEGIN',
    'START TRANSACTION',
    'COMMIT',
    'END',
    'ROLLBACK',
    'ABORT',
    "PREPARE TRANSACTION 'eo-test'",
    'commit',
    'rollback',
    // Anywhere in a multi-statement string, not only first: what came before would run,
    // then the handler's later writes would run outside the claim's transaction.
    'SELECT 1; ROLLBACK',
    'SELECT 1; COMMIT',
    "SELECT ';' AS s; /* ; */ -- ;\nEND",
    'SELECT $tag$ ; $tag$; ABORT',
  ];

  it('ctx.tx.query() rejects BEGIN/COMMIT/ROLLBACK/... with EO_TX_CONTROL without sending them; the claim commits', async () => {
    const answers: string[] = [];
    const xids: string[] = [];
    const h = await memoryHarness(db, {
      before: async (_m, ctx) => {
        const xid = async () =>
          (await ctx.tx.query<{ x: string }>('SELECT txid_current()::text AS x')).rows[0]!.x;
        xids.push(await xid());
        for (const sql of forbidden) {
          try {
            await ctx.tx.query(sql);
            answers.push(`sent ${sql}`);
          } catch (error) {
            answers.push(codesOf(error)[0] ?? String(error));
          }
        }
        xids.push(await xid());
      },
    });
    const message = h.source.send({ id: 'g', amount: 3 }, { key: 'g' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message) || answers.length > 0, { what: 'handler ran' });
      expect(answers).toEqual(forbidden.map(() => 'EO_TX_CONTROL'));
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    // Nothing was sent: the handler stayed in the claim's transaction from start to end.
    expect(xids).toHaveLength(2);
    expect(xids[1]).toBe(xids[0]);
    expect(message.outcomes).toEqual(['processed']);
    expect(await h.effects()).toEqual([{ id: 'g', amount: 3 }]);
    expect(await claimRows('g')).toBe(1);
  });

  it('SAVEPOINT, ROLLBACK TO [SAVEPOINT] and RELEASE SAVEPOINT still work, so a handler can recover from a failed statement', async () => {
    const h = await memoryHarness(db, {
      before: async (_m, ctx) => {
        await ctx.tx.query('SAVEPOINT s1');
        await expect(ctx.tx.query("INSERT INTO taken (id) VALUES ('x')")).rejects.toMatchObject({
          code: '23505',
        });
        await ctx.tx.query('ROLLBACK TO SAVEPOINT s1');
        await ctx.tx.query('RELEASE SAVEPOINT s1');
        await ctx.tx.query('SAVEPOINT s2');
        await expect(ctx.tx.query("INSERT INTO taken (id) VALUES ('x')")).rejects.toMatchObject({
          code: '23505',
        });
        await ctx.tx.query('ROLLBACK TO s2');
      },
    });
    const message = h.source.send({ id: 'sp', amount: 4 }, { key: 'sp' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(message.outcomes).toEqual(['processed']);
    expect(await h.effects()).toEqual([{ id: 'sp', amount: 4 }]);
    expect(await claimRows('sp')).toBe(1);
  });

  it('ctx.tx.release() throws EO_TX_CONTROL and the transaction stays the claim’s', async () => {
    let thrown: unknown = 'not called';
    const h = await memoryHarness(db, {
      before: async (_m, ctx) => {
        try {
          ctx.tx.release();
          thrown = undefined;
        } catch (error) {
          thrown = error;
        }
      },
    });
    const message = h.source.send({ id: 'r', amount: 5 }, { key: 'r' });
    await h.consumer.start();
    try {
      await waitFor(() => thrown !== 'not called', { what: 'handler ran' });
      expect(codesOf(thrown)[0]).toBe('EO_TX_CONTROL');
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(message.outcomes).toEqual(['processed']);
    expect(await h.effects()).toEqual([{ id: 'r', amount: 5 }]);
  });
});

describe('a constraint that fails at COMMIT', () => {
  it('DEFERRABLE INITIALLY DEFERRED foreign key violated: EO_COMMIT_FAILED (23503), attempts spent, dead-lettered; the others commit', async () => {
    await db.pool.query(`
      CREATE TABLE parent (id text PRIMARY KEY);
      CREATE TABLE child (id text PRIMARY KEY,
        parent_id text NOT NULL REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
      INSERT INTO parent VALUES ('p-ok')`);
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      maxAttempts: 2,
      after: async (m, ctx) => {
        await ctx.tx.query('INSERT INTO child (id, parent_id) VALUES ($1, $2)', [
          m.id,
          m.id === 'orphan' ? 'p-missing' : 'p-ok',
        ]);
      },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    const orphan = h.source.send({ id: 'orphan', amount: 1 }, { key: 'orphan' });
    const fine = h.source.send({ id: 'fine', amount: 2 }, { key: 'fine' });
    await h.consumer.start();
    try {
      await settledOrLooping(orphan, failures);
      await waitFor(() => settled(fine), { what: 'the good message settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(orphan.state).toBe('dead-lettered');
    expect(orphan.deadLetterReason?.code).toBe('EO_COMMIT_FAILED');
    expect(failures.map((f) => f.error.code)).toEqual(['EO_COMMIT_FAILED', 'EO_COMMIT_FAILED']);
    const first = failures[0]!.error;
    expect(first.retryable).toBe(true);
    expect((first.cause as { code?: string } | undefined)?.code).toBe('23503');
    expect(first.details.sqlstate).toBe('23503');
    expect(fine.outcomes).toEqual(['processed']);
    expect(await h.effects()).toEqual([{ id: 'fine', amount: 2 }]);
    expect(await claimRows('orphan')).toBe(0);
  });
});

describe('a downstream network error is the handler’s failure, not a database outage', () => {
  it.each(['ECONNREFUSED', 'ETIMEDOUT', 'ENOTFOUND', 'EPIPE'])(
    '%s thrown by the handler spends attempts and is dead-lettered with EO_HANDLER; other messages flow',
    async (errno) => {
      const failures: Failure[] = [];
      const h = await memoryHarness(db, {
        maxAttempts: 2,
        after: async (m) => {
          if (m.id === 'http')
            throw Object.assign(new Error(`connect ${errno} 127.0.0.1:9`), { code: errno });
        },
      });
      h.consumer.on('failed', (f) => failures.push(f));
      const http = h.source.send({ id: 'http', amount: 1 }, { key: `http-${errno}` });
      const other = h.source.send({ id: 'other', amount: 2 }, { key: `other-${errno}` });
      await h.consumer.start();
      try {
        await settledOrLooping(http, failures);
        await waitFor(() => settled(other), { what: 'the other message settled' });
      } finally {
        await h.consumer.stop();
      }
      expect(http.state).toBe('dead-lettered');
      expect(http.outcomes).toEqual(['retry', 'dead-lettered']);
      expect(http.deadLetterReason?.code).toBe('EO_HANDLER');
      expect(codesOf(http.deadLetterReason)).toContain(errno);
      expect(failures.map((f) => f.willRetry)).toEqual([true, false]);
      expect(other.outcomes).toEqual(['processed']);
      expect(await h.effects()).toEqual([{ id: 'other', amount: 2 }]);
    },
  );

  it('a backend killed mid-handler (pg_terminate_backend) is infrastructure: no attempt spent, applied once', async () => {
    const failures: Failure[] = [];
    let killed = false;
    const h = await memoryHarness(db, {
      maxAttempts: 1,
      before: async (_m, ctx) => {
        if (killed) return;
        killed = true;
        const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const pid = rows[0]!.pid;
        await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await waitFor(
          async () =>
            (await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid]))
              .rowCount === 0,
          { what: 'backend gone' },
        );
        await ctx.tx.query('SELECT 1'); // the handler's next statement meets the dead connection
      },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    const message = h.source.send({ id: 'k', amount: 6 }, { key: 'killed' });
    await h.consumer.start();
    try {
      await settledOrLooping(message, failures);
    } finally {
      await h.consumer.stop();
    }
    expect(message.state).toBe('acked');
    expect(failures).toHaveLength(1);
    expect(failures[0]!.willRetry).toBe(true);
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(await h.effects()).toEqual([{ id: 'k', amount: 6 }]);
  });
});

describe('serialization failures and deadlocks are retried in place, without spending an attempt', () => {
  /** A pool whose transactions are SERIALIZABLE by default (the database default, set by the app). */
  function serializablePool(): pg.Pool {
    const pool = new pg.Pool({
      connectionString: databaseUrl(),
      max: 10,
      options: `-c search_path=${db.schema} -c default_transaction_isolation=serializable`,
    });
    pool.on('error', () => undefined);
    return pool;
  }

  it('a deadlock (40P01) between two keys updating the same rows in opposite order: both processed at their first delivery', async () => {
    await db.pool.query(
      'CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO accounts VALUES (1, 0), (2, 0)',
    );
    const calls: Array<{ id: string; attempt: number }> = [];
    const locked = { a: deferred(), b: deferred() };
    const h = await memoryHarness(db, {
      concurrency: 4,
      before: async (m, ctx) => {
        calls.push({ id: m.id, attempt: ctx.attempt });
        const first = calls.filter((c) => c.id === m.id).length === 1;
        const [mine, theirs] = m.id === 'a' ? [1, 2] : [2, 1];
        await ctx.tx.query('UPDATE accounts SET balance = balance + 1 WHERE id = $1', [mine]);
        if (first) {
          // Each holds its own row before going for the other's: one of them deadlocks.
          (m.id === 'a' ? locked.a : locked.b).resolve();
          await (m.id === 'a' ? locked.b : locked.a).promise;
        }
        await ctx.tx.query('UPDATE accounts SET balance = balance + 1 WHERE id = $1', [theirs]);
      },
    });
    const a = h.source.send({ id: 'a', amount: 1 }, { key: 'dl-a' });
    const b = h.source.send({ id: 'b', amount: 2 }, { key: 'dl-b' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(a) && settled(b), { timeoutMs: 30_000, what: 'both settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(a.outcomes).toEqual(['processed']);
    expect(b.outcomes).toEqual(['processed']);
    expect(a.attempts + b.attempts).toBe(2);
    // The deadlock's victim ran again in a fresh transaction, still at attempt 1. Its rerun
    // can start before the winner took the victim's row and deadlock once more, so 3 or
    // more runs, within the in-place budget (serializationRetries, default 3).
    expect(calls.length).toBeGreaterThanOrEqual(3);
    expect(calls.length).toBeLessThanOrEqual(2 + 3);
    expect(calls.every((c) => c.attempt === 1)).toBe(true);
    const { rows } = await db.pool.query<{ balance: number }>(
      'SELECT balance FROM accounts ORDER BY id',
    );
    expect(rows.map((r) => r.balance)).toEqual([2, 2]);
    expect(await h.effects()).toHaveLength(2);
  });

  describe('under default_transaction_isolation = serializable', () => {
    let pool: pg.Pool;
    beforeEach(async () => {
      pool = serializablePool();
      await db.pool.query(
        'CREATE TABLE counter (id int PRIMARY KEY, n int NOT NULL); INSERT INTO counter VALUES (1, 0)',
      );
    });
    afterEach(async () => pool.end());

    /**
     * Runs after the handler's insert. The first call meets a concurrent committed
     * update of the row it then updates: 40001, which it throws or swallows.
     */
    function concurrentUpdate(calls: number[], swallow: boolean) {
      return async (_m: Charge, ctx: { tx: pg.PoolClient; attempt: number }) => {
        calls.push(ctx.attempt);
        if (calls.length === 1) await db.pool.query('UPDATE counter SET n = n + 1 WHERE id = 1');
        try {
          await ctx.tx.query('UPDATE counter SET n = n + 10 WHERE id = 1');
        } catch (error) {
          if (!swallow || (error as { code?: string }).code !== '40001') throw error;
        }
      };
    }

    it.each([
      ['thrown by the handler', false],
      ['swallowed by the handler', true],
    ])(
      'a serialization failure (40001) %s: rolled back and run again at attempt 1, applied once',
      async (_what, swallow) => {
        const calls: number[] = [];
        const h = await memoryHarness(db, { pool, after: concurrentUpdate(calls, swallow) });
        const message = h.source.send({ id: 'ser', amount: 7 }, { key: `ser-${swallow}` });
        await h.consumer.start();
        try {
          await waitFor(() => settled(message) && calls.length > 0, { what: 'settled' });
        } finally {
          await h.consumer.stop();
        }
        expect(calls).toEqual([1, 1]);
        expect(message.outcomes).toEqual(['processed']);
        expect(message.attempts).toBe(1);
        const { rows } = await db.pool.query<{ n: number }>('SELECT n FROM counter');
        expect(rows[0]!.n).toBe(11);
        expect(await h.effects()).toEqual([{ id: 'ser', amount: 7 }]);
      },
    );

    it('a serialization failure at COMMIT (write skew caught by SSI): run again at attempt 1, applied once', async () => {
      await db.pool.query('CREATE TABLE ledger (class int NOT NULL, value int NOT NULL)');
      const calls: number[] = [];
      const h = await memoryHarness(db, {
        pool,
        before: async (_m, ctx) => {
          calls.push(ctx.attempt);
          await ctx.tx.query('SELECT sum(value) FROM ledger WHERE class = 1');
          await ctx.tx.query('INSERT INTO ledger VALUES (2, 10)');
          if (calls.length > 1) return;
          // A concurrent serializable transaction does the mirror image and commits first:
          // this transaction is the pivot, and Postgres cancels it at its COMMIT.
          const other = await pool.connect();
          try {
            await other.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
            await other.query('SELECT sum(value) FROM ledger WHERE class = 2');
            await other.query('INSERT INTO ledger VALUES (1, 20)');
            await other.query('COMMIT');
          } finally {
            other.release();
          }
        },
      });
      const message = h.source.send({ id: 'ssi', amount: 8 }, { key: 'ssi' });
      await h.consumer.start();
      try {
        await waitFor(() => settled(message) && calls.length > 0, { what: 'settled' });
      } finally {
        await h.consumer.stop();
      }
      expect(calls).toEqual([1, 1]);
      expect(message.outcomes).toEqual(['processed']);
      const { rows } = await db.pool.query<{ class: number; value: number }>(
        'SELECT class, value FROM ledger ORDER BY class',
      );
      expect(rows).toEqual([
        { class: 1, value: 20 },
        { class: 2, value: 10 },
      ]);
      expect(await h.effects()).toEqual([{ id: 'ssi', amount: 8 }]);
    });
  });
});
