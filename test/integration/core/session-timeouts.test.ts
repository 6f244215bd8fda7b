/**
 * Issue 32, defect 3: a failure the message itself causes spends an attempt, even when
 * it reaches the runner as a dead connection or a refused library write.
 *
 * - `idle_in_transaction_session_timeout` (25P03): a handler slower than it gets its
 *   session ended by the server, which sends the FATAL error before it closes the
 *   socket. That is this transaction's doing: retried with an attempt spent, then
 *   dead-lettered; never retried for ever as an outage.
 * - A session ended for another reason (`pg_terminate_backend`, 57P01) stays
 *   infrastructure: no attempt spent, the redelivery runs.
 * - `SET TRANSACTION READ ONLY` inside the handler makes the adapter's own write (the
 *   Kafka offset of `offsets: 'postgres'`) fail with 25006: the handler's failure too.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import {
  PostgresOffsetStore,
  migrateKafkaOffsets,
} from '../../../adapters/kafka/postgres-offsets.js';
import { createConsumer, migrate, type EffectivelyOnceError } from '../../../src/index.js';
import type { MemoryMessage } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { ManualSource } from '../../helpers/manual-source.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

const IDLE_MS = 300;

let db: TestDatabase;
/** Sessions that the server ends after IDLE_MS idle in a transaction. */
let timed: pg.Pool;
beforeAll(async () => {
  db = await createTestDatabase('session_timeouts');
  await migrate(db.pool, { schema: db.schema });
  timed = new pg.Pool({
    connectionString: databaseUrl(),
    max: 5,
    options: `-c search_path=${db.schema} -c idle_in_transaction_session_timeout=${IDLE_MS}`,
  });
  timed.on('error', () => undefined);
});
afterAll(async () => {
  await timed.end();
  await db.close();
});

type Failure = { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };

/** Resolves when the server has closed the claim's session (no fixed sleep: load-proof). */
function sessionEnded(tx: pg.PoolClient): Promise<void> {
  return new Promise((resolve) => tx.once('end', () => resolve()));
}

const settled = (m: MemoryMessage<Charge>) => m.state === 'acked' || m.state === 'dead-lettered';

/** Settled, or failed `bound` times without settling (retried for ever). */
async function settledOrLooping(m: MemoryMessage<Charge>, failures: Failure[], bound = 6) {
  await waitFor(
    () => settled(m) || failures.filter((f) => f.key === m.options.key).length >= bound,
    { timeoutMs: 30_000, what: `message ${m.options.key} settled or looping` },
  );
}

describe('a handler slower than idle_in_transaction_session_timeout', () => {
  it.each([
    ['returns after its session ended', false],
    ['queries after its session ended, and throws', true],
  ])('%s: attempts spent, dead-lettered (25P03)', async (_what, queryAfter) => {
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      name: `idle-${String(queryAfter)}`,
      pool: timed,
      maxAttempts: 2,
      after: async (message, ctx) => {
        if (message.id !== 'slow') return;
        await sessionEnded(ctx.tx);
        if (queryAfter) await ctx.tx.query('SELECT 1');
      },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    await h.consumer.start();
    try {
      const slow = h.source.send({ id: 'slow', amount: 1 }, { key: `slow-${String(queryAfter)}` });
      await settledOrLooping(slow, failures);
      expect(failures.map((f) => [f.attempt, f.willRetry])).toEqual([
        [1, true],
        [2, false],
      ]);
      expect(slow.state).toBe('dead-lettered');
      expect(JSON.stringify(failures[0]!.error.details)).toContain('25P03');
      expect(await h.effects()).toEqual([]);
    } finally {
      await h.consumer.stop();
    }
  });

  it('batch mode: the slow one is isolated and dead-lettered, the others commit', async () => {
    await db.pool.query('TRUNCATE charges');
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      name: 'idle-batch',
      pool: timed,
      maxAttempts: 2,
      batch: { maxSize: 10, maxWaitMs: 50 },
      after: async (message, ctx) => {
        if (message.id === 'slow') await sessionEnded(ctx.tx);
      },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    const fast = h.source.send({ id: 'fast', amount: 1 }, { key: 'batch-fast' });
    const slow = h.source.send({ id: 'slow', amount: 1 }, { key: 'batch-slow' });
    await h.consumer.start();
    try {
      await settledOrLooping(slow, failures);
      await waitFor(() => settled(fast), { what: 'fast settled' });
      expect(slow.state).toBe('dead-lettered');
      expect(fast.state).toBe('acked');
      expect((await h.effects()).map((e) => e.id)).toEqual(['fast']);
    } finally {
      await h.consumer.stop();
    }
  });
});

describe('a session ended for another reason', () => {
  it('pg_terminate_backend (57P01) under the handler stays infrastructure: no attempt spent', async () => {
    const failures: Failure[] = [];
    let killed = false;
    const h = await memoryHarness(db, {
      name: 'terminated',
      pool: timed,
      maxAttempts: 1,
      before: async (_m, ctx) => {
        if (killed) return;
        killed = true;
        const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const ended = sessionEnded(ctx.tx);
        await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        await ended;
      },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    await h.consumer.start();
    try {
      const m = h.source.send({ id: 'killed', amount: 1 }, { key: 'killed' });
      await settledOrLooping(m, failures);
      expect(m.state).toBe('acked');
      expect(failures.map((f) => f.willRetry)).toEqual([true]);
      expect((await h.effects()).map((e) => e.id)).toContain('killed');
    } finally {
      await h.consumer.stop();
    }
  });
});

describe("SET TRANSACTION READ ONLY in a handler with offsets: 'postgres'", () => {
  it.each([
    ['per message', undefined],
    ['batch mode', { maxSize: 10, maxWaitMs: 5 }],
  ])(
    '%s: the offset write fails with 25006, the handler’s failure: dead-lettered at maxAttempts',
    async (mode, batch) => {
      await migrateKafkaOffsets(db.pool, { schema: db.schema });
      const offsets = new PostgresOffsetStore(db.pool, `group-${mode}`, {
        schema: db.schema,
        table: 'eo_kafka_offsets',
      });
      const source = new ManualSource<string>();
      const consumer = createConsumer<string>({
        name: `read-only-${mode}`,
        source,
        pool: db.pool,
        schema: db.schema,
        maxAttempts: 2,
        ...(batch === undefined ? {} : { batch }),
        handler: async (_body, ctx) => {
          await ctx.tx.query('SET TRANSACTION READ ONLY');
        },
      });
      await consumer.start();
      try {
        const result = await source.push({
          key: `ro-${mode}`,
          body: 'x',
          attempt: 2,
          inTransaction: (tx) => offsets.save(tx, 'topic', 0, 8n, undefined),
        });
        expect(result.calls).toEqual(['deadLetter']);
        expect(JSON.stringify(result.deadLetterReason?.details)).toContain('25006');
      } finally {
        await consumer.stop();
      }
    },
  );
});
