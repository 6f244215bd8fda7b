/**
 * Issue 11, batch mode: a poison message whose failure has a known outcome (a
 * swallowed SQL error, a deferred constraint failing at COMMIT, a downstream network
 * error) is bisected out of its batch like any handler failure, so the others commit;
 * and the batch transaction guards transaction control like the per-message one.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { createConsumer, type BatchItem, type EffectivelyOnceError } from '../../../src/index.js';
import { memorySource, type MemoryMessage } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { codesOf } from '../../helpers/manual-source.js';
import { memoryHarness, type Charge } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('handler_faults_batch');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges, processed_messages, taken, child, parent');
  await db.pool.query("CREATE TABLE taken (id text PRIMARY KEY); INSERT INTO taken VALUES ('x')");
});

type Failure = { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };

const BATCH = { maxSize: 10, maxWaitMs: 50 };
const settled = (m: MemoryMessage<Charge>) => m.state === 'acked' || m.state === 'dead-lettered';

async function claimedKeys(): Promise<string[]> {
  const { rows } = await db.pool.query<{ k: string }>(
    'SELECT message_key AS k FROM processed_messages ORDER BY 1',
  );
  return rows.map((r) => r.k);
}

/** Sends good-1, poison, good-2 (one batch: sent before start); waits until all settle or the poison loops. */
async function runPoisonBatch(
  h: Awaited<ReturnType<typeof memoryHarness>>,
  failures: Failure[],
): Promise<{ poison: MemoryMessage<Charge>; good: Array<MemoryMessage<Charge>> }> {
  const good = [h.source.send({ id: 'good-1', amount: 1 }, { key: 'good-1' })];
  const poison = h.source.send({ id: 'poison', amount: 2 }, { key: 'poison' });
  good.push(h.source.send({ id: 'good-2', amount: 3 }, { key: 'good-2' }));
  await h.consumer.start();
  try {
    await waitFor(
      () =>
        [poison, ...good].every(settled) || failures.filter((f) => f.key === 'poison').length >= 8,
      { timeoutMs: 30_000, what: 'batch settled or poison looping' },
    );
  } finally {
    await h.consumer.stop();
  }
  return { poison, good };
}

function expectPoisonIsolated(
  poison: MemoryMessage<Charge>,
  good: Array<MemoryMessage<Charge>>,
  code: string,
): void {
  expect(poison.state).toBe('dead-lettered');
  expect(poison.deadLetterReason?.code).toBe(code);
  expect(good.map((m) => m.state)).toEqual(['acked', 'acked']);
  expect(good.map((m) => m.outcomes.at(-1))).toEqual(['processed', 'processed']);
}

describe('batch mode: failures with a known outcome are bisected to the poison message', () => {
  it('a swallowed SQL error: the poison is dead-lettered with EO_TX_ABORTED, the others commit', async () => {
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      batch: BATCH,
      maxAttempts: 2,
      after: async (m, ctx) => {
        if (m.id !== 'poison') return;
        try {
          await ctx.tx.query("INSERT INTO taken (id) VALUES ('x')");
        } catch (error) {
          if ((error as { code?: string }).code !== '23505') throw error;
        }
      },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    const { poison, good } = await runPoisonBatch(h, failures);
    expectPoisonIsolated(poison, good, 'EO_TX_ABORTED');
    expect(codesOf(poison.deadLetterReason)).toContain('23505');
    expect(await h.effects()).toEqual([
      { id: 'good-1', amount: 1 },
      { id: 'good-2', amount: 3 },
    ]);
    expect(await claimedKeys()).toEqual(['good-1', 'good-2']);
  });

  it('a deferred foreign key violated at COMMIT: EO_COMMIT_FAILED isolates the poison, the others commit', async () => {
    await db.pool.query(`
      CREATE TABLE parent (id text PRIMARY KEY);
      CREATE TABLE child (id text PRIMARY KEY,
        parent_id text NOT NULL REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
      INSERT INTO parent VALUES ('p-ok')`);
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      batch: BATCH,
      maxAttempts: 2,
      after: async (m, ctx) => {
        await ctx.tx.query('INSERT INTO child (id, parent_id) VALUES ($1, $2)', [
          m.id,
          m.id === 'poison' ? 'p-missing' : 'p-ok',
        ]);
      },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    const { poison, good } = await runPoisonBatch(h, failures);
    expectPoisonIsolated(poison, good, 'EO_COMMIT_FAILED');
    expect(poison.deadLetterReason?.details.sqlstate).toBe('23503');
    expect(await h.effects()).toEqual([
      { id: 'good-1', amount: 1 },
      { id: 'good-2', amount: 3 },
    ]);
    expect(await claimedKeys()).toEqual(['good-1', 'good-2']);
  });

  it('a downstream ECONNREFUSED: EO_HANDLER isolates the poison, the others commit', async () => {
    const failures: Failure[] = [];
    const h = await memoryHarness(db, {
      batch: BATCH,
      maxAttempts: 2,
      after: async (m) => {
        if (m.id === 'poison')
          throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), {
            code: 'ECONNREFUSED',
          });
      },
    });
    h.consumer.on('failed', (f) => failures.push(f));
    const { poison, good } = await runPoisonBatch(h, failures);
    expectPoisonIsolated(poison, good, 'EO_HANDLER');
    expect(codesOf(poison.deadLetterReason)).toContain('ECONNREFUSED');
    expect(await h.effects()).toEqual([
      { id: 'good-1', amount: 1 },
      { id: 'good-2', amount: 3 },
    ]);
  });
});

describe('batch mode: BatchContext.tx guards transaction control', () => {
  it('query(COMMIT / ROLLBACK / BEGIN) rejects with EO_TX_CONTROL, release() throws it, and the batch commits', async () => {
    await db.pool.query(
      'CREATE TABLE IF NOT EXISTS charges (id text NOT NULL, amount int NOT NULL)',
    );
    const source = memorySource<Charge>();
    const answers: string[] = [];
    const consumer = createConsumer<Charge>({
      name: 'batch-guard',
      source,
      pool: db.pool,
      schema: db.schema,
      batch: BATCH,
      batchHandler: async (items: ReadonlyArray<BatchItem<Charge>>, ctx) => {
        for (const sql of ['COMMIT', 'ROLLBACK', 'BEGIN']) {
          try {
            await ctx.tx.query(sql);
            answers.push(`sent ${sql}`);
          } catch (error) {
            answers.push(codesOf(error)[0] ?? String(error));
          }
        }
        try {
          ctx.tx.release();
          answers.push('released');
        } catch (error) {
          answers.push(codesOf(error)[0] ?? String(error));
        }
        for (const item of items)
          await ctx.tx.query('INSERT INTO charges (id, amount) VALUES ($1, $2)', [
            item.message.id,
            item.message.amount,
          ]);
      },
    });
    const sent = [
      source.send({ id: 'b1', amount: 1 }, { key: 'b1' }),
      source.send({ id: 'b2', amount: 2 }, { key: 'b2' }),
    ];
    await consumer.start();
    try {
      await waitFor(() => answers.length >= 4, { what: 'batch handler ran' });
      expect(answers.slice(0, 4)).toEqual([
        'EO_TX_CONTROL',
        'EO_TX_CONTROL',
        'EO_TX_CONTROL',
        'EO_TX_CONTROL',
      ]);
      await waitFor(() => sent.every(settled), { what: 'settled' });
    } finally {
      await consumer.stop();
    }
    expect(sent.map((m) => m.outcomes)).toEqual([['processed'], ['processed']]);
    expect(await claimedKeys()).toEqual(['b1', 'b2']);
  });
});
