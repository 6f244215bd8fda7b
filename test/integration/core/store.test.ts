import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createConsumer, migrate, prune } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('store');
});
afterAll(async () => db.close());

describe('migrate', () => {
  it('is idempotent and safe when many workers run it at once', async () => {
    const schema = `${db.schema}_m`;
    await Promise.all(Array.from({ length: 10 }, () => migrate(db.pool, { schema })));
    await migrate(db.pool, { schema });
    const { rows } = await db.pool.query(
      "SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'processed_messages' ORDER BY indexname",
      [schema],
    );
    expect(rows.map((r: { indexname: string }) => r.indexname)).toEqual([
      'processed_messages_expires_at_idx',
      'processed_messages_pkey',
      'processed_messages_processed_at_idx',
    ]);
    await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
  });

  it('quotes schema and table names: quotes, spaces and SQL cannot inject', async () => {
    await db.pool.query('CREATE TABLE canary (x int)');
    const schema = `${db.schema} we"ird`;
    const table = 'pro"; DROP TABLE canary; --cessed';
    const source = memorySource<{ n: number }>();
    const consumer = createConsumer<{ n: number }>({
      name: "o'brien",
      source,
      pool: db.pool,
      schema,
      table,
      handler: async (m, ctx) => {
        await ctx.tx.query('INSERT INTO canary (x) VALUES ($1)', [m.n]);
      },
    });
    // Same payload twice: whichever delivery claims first applies it, the other is a duplicate.
    source.send({ n: 1 }, { key: "'); DROP TABLE canary; --" });
    source.send({ n: 1 }, { key: "'); DROP TABLE canary; --" });
    await consumer.start();
    await waitFor(() => source.outstanding === 0);
    await consumer.stop();
    const tables = await db.pool.query(
      'SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1',
      [schema],
    );
    // The table, and the ledger that records its migration steps (with its name as data).
    expect(tables.rows).toEqual([
      { tablename: 'effectively_once_migrations' },
      { tablename: table },
    ]);
    const ledger = await db.pool.query(
      `SELECT table_name FROM "${schema.replace(/"/g, '""')}".effectively_once_migrations`,
    );
    expect(ledger.rows).toEqual([{ table_name: table }]);
    const claims = await db.pool.query(
      `SELECT consumer, message_key FROM "${schema.replace(/"/g, '""')}"."${table.replace(/"/g, '""')}"`,
    );
    expect(claims.rows).toEqual([
      { consumer: "o'brien", message_key: "'); DROP TABLE canary; --" },
    ]);
    expect((await db.pool.query('SELECT x FROM canary')).rows).toEqual([{ x: 1 }]);
    expect(consumer.stats()).toMatchObject({ processed: 1, duplicates: 1 });
    await db.pool.query(`DROP SCHEMA "${schema.replace(/"/g, '""')}" CASCADE`);
  });
});

describe('prune', () => {
  it('removes only rows older than the window, in batches, optionally per consumer', async () => {
    await migrate(db.pool, { schema: db.schema });
    await db.pool.query(`
      INSERT INTO processed_messages (consumer, message_key, processed_at)
      SELECT c, 'old-' || g, now() - interval '2 days' FROM generate_series(1, 25) g, unnest(ARRAY['a','b']) c
      UNION ALL
      SELECT c, 'new-' || g, now() - interval '1 minute' FROM generate_series(1, 5) g, unnest(ARRAY['a','b']) c`);
    const statements: string[] = [];
    const spy = db.pool.query.bind(db.pool);
    const counting = Object.create(db.pool) as typeof db.pool;
    counting.query = ((...args: Parameters<typeof spy>) => {
      if (String(args[0]).includes('DELETE')) statements.push(String(args[0]));
      return spy(...args);
    }) as typeof db.pool.query;

    const deletedA = await prune(counting, {
      consumer: 'a',
      olderThan: 24 * 3600_000,
      batchSize: 10,
      schema: db.schema,
    });
    expect(deletedA).toBe(25);
    expect(statements).toHaveLength(3); // 10 + 10 + 5
    const left = await db.pool.query<{ consumer: string; n: string }>(
      'SELECT consumer, count(*) AS n FROM processed_messages GROUP BY consumer ORDER BY consumer',
    );
    expect(left.rows).toEqual([
      { consumer: 'a', n: '5' },
      { consumer: 'b', n: '30' },
    ]);
    expect(
      await prune(db.pool, { olderThan: new Date(Date.now() - 3600_000), schema: db.schema }),
    ).toBe(25);
    const newest = await db.pool.query(
      "SELECT count(*)::int AS n FROM processed_messages WHERE message_key LIKE 'new-%'",
    );
    expect(newest.rows).toEqual([{ n: 10 }]);
  });

  it('with a dutyCycle below 1 waits between batches, and still deletes every old row', async () => {
    await migrate(db.pool, { schema: db.schema });
    await db.pool.query(`DELETE FROM processed_messages`);
    await db.pool.query(`
      INSERT INTO processed_messages (consumer, message_key, processed_at)
      SELECT 'duty', 'old-' || g, now() - interval '2 days' FROM generate_series(1, 30) g`);
    const durations: number[] = [];
    const slow = Object.create(db.pool) as typeof db.pool;
    slow.query = (async (...args: Parameters<typeof db.pool.query>) => {
      const started = performance.now();
      await new Promise((r) => setTimeout(r, 20));
      const result = await (db.pool.query as (...a: unknown[]) => Promise<unknown>)(...args);
      if (String(args[0]).includes('DELETE')) durations.push(performance.now() - started);
      return result;
    }) as typeof db.pool.query;

    const started = performance.now();
    const deleted = await prune(slow, {
      olderThan: 24 * 3600_000,
      batchSize: 10,
      schema: db.schema,
      dutyCycle: 0.5,
    });
    const elapsed = performance.now() - started;
    expect(deleted).toBe(30);
    expect(durations).toHaveLength(4); // 10 + 10 + 10 + 0
    // Each full batch is followed by a pause as long as itself (the last, short one is not).
    const busy = durations.reduce((a, b) => a + b, 0);
    const paused = durations.slice(0, 3).reduce((a, b) => a + b, 0);
    expect(elapsed).toBeGreaterThanOrEqual(busy + paused - 5);
    await expect(prune(db.pool, { olderThan: 1, schema: db.schema, dutyCycle: 0 })).rejects.toThrow(
      /dutyCycle/,
    );
  });
});

describe('retention', () => {
  it('prunes the consumer’s rows older than the window in the background while consuming', async () => {
    const source = memorySource<{ n: number }>();
    const consumer = createConsumer<{ n: number }>({
      name: 'retained',
      source,
      pool: db.pool,
      schema: db.schema,
      retention: { olderThanMs: 3600_000, intervalMs: 100, batchSize: 7 },
      handler: async () => undefined,
    });
    await migrate(db.pool, { schema: db.schema });
    // Claimed 2 h ago under this hour's retention: expired an hour ago. (A row without an
    // expiry, from before the column, goes only by a prune with a window.)
    await db.pool.query(`
      INSERT INTO processed_messages (consumer, message_key, processed_at, expires_at)
      SELECT c, 'stale-' || g, now() - interval '2 hours', now() - interval '1 hour'
        FROM generate_series(1, 30) g, unnest(ARRAY['retained','other']) c`);
    const pruned: number[] = [];
    consumer.on('pruned', ({ deleted }) => pruned.push(deleted));
    source.send({ n: 1 }, { key: 'fresh' });
    await consumer.start();
    const count = async (consumerName: string) =>
      (
        await db.pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM processed_messages WHERE consumer = $1',
          [consumerName],
        )
      ).rows[0]!.n;
    await waitFor(async () => (await count('retained')) === 1, { what: 'stale rows pruned' });
    await consumer.stop();
    expect(await count('other')).toBe(30);
    expect(pruned.reduce((a, b) => a + b, 0)).toBe(30);
    expect(consumer.stats().pruned).toBe(30);
  });
});

describe('migrate next to a busy fleet', () => {
  it('does not wait behind an open claim transaction when the table already exists', async () => {
    await migrate(db.pool, { schema: db.schema });
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        "INSERT INTO processed_messages (consumer, message_key) VALUES ('busy', 'held')",
      );
      const began = Date.now();
      await migrate(db.pool, { schema: db.schema });
      expect(Date.now() - began).toBeLessThan(1000);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
  });
});
