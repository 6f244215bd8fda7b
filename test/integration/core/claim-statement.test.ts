/**
 * Issue 11: the claim statement must be right whatever the session says
 * (`standard_conforming_strings`, a `lock_timeout` the app set), must fail closed on a
 * result it does not recognise, and a payload that cannot be hashed must be
 * dead-lettered rather than left unsettled.
 */
import { createHash } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer, type EffectivelyOnceError } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { ManualSource } from '../../helpers/manual-source.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
const pools: pg.Pool[] = [];
beforeAll(async () => {
  db = await createTestDatabase('claim_statement');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges, processed_messages');
});
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.end().catch(() => undefined)));
});

/** A pool on the test schema whose every connection first runs `setup` (as an app's pool.on('connect') would). */
function extraPool(setup?: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl(),
    options: `-c search_path=${db.schema}`,
    max: 10,
  });
  pool.on('error', () => undefined);
  if (setup !== undefined)
    pool.on('connect', (client) => {
      client.query(setup).catch(() => undefined);
    });
  pools.push(pool);
  return pool;
}

const settled = (m: { state: string }) => m.state === 'acked' || m.state === 'dead-lettered';

describe('session settings on the claim’s connection', () => {
  it('standard_conforming_strings = off: the stored hash is the payload’s sha256, and a redelivery is a duplicate', async () => {
    const pool = extraPool('SET standard_conforming_strings = off');
    const h = await memoryHarness(db, { pool });
    h.source.loseNextAcks(1); // crash after COMMIT: the same payload comes back
    const body = { id: 'scs', amount: 42 };
    const message = h.source.send(body, { key: 'scs' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(message.outcomes).toEqual(['processed', 'duplicate']);
    const { rows } = await db.pool.query<{ hash: string }>(
      "SELECT encode(payload_hash, 'hex') AS hash FROM processed_messages WHERE message_key = 'scs'",
    );
    expect(rows).toEqual([
      { hash: createHash('sha256').update(JSON.stringify(body)).digest('hex') },
    ]);
    expect(await h.effects()).toEqual([body]);
  });

  it('a lock_timeout the application set on the session is what the handler sees', async () => {
    const pool = extraPool("SET lock_timeout = '1234ms'");
    const seen: string[] = [];
    const h = await memoryHarness(db, {
      pool,
      lockTimeoutMs: 5000,
      before: async (_m, ctx) => {
        const { rows } = await ctx.tx.query<{ lock_timeout: string }>('SHOW lock_timeout');
        seen.push(rows[0]!.lock_timeout);
      },
    });
    const message = h.source.send({ id: 'lt', amount: 1 }, { key: 'lt' });
    await h.consumer.start();
    try {
      await waitFor(() => settled(message), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(seen).toEqual(['1234ms']);
    expect(message.outcomes).toEqual(['processed']);
    const { rows } = await pool.query<{ lock_timeout: string }>('SHOW lock_timeout');
    expect(rows[0]!.lock_timeout).toBe('1234ms');
  });
});

type Results = pg.QueryResult | pg.QueryResult[];

/**
 * Makes the pool's clients answer the next `times` claim statements (the INSERT into
 * the dedup table) with `mangle` applied to the real result, as a driver or proxy that
 * returns an unexpected shape would. The statement itself really runs.
 */
function mangleClaims(pool: pg.Pool, times: number, mangle: (r: Results) => unknown): void {
  const connect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>;
  const patched = new WeakSet<pg.PoolClient>();
  let left = times;
  (pool as { connect: () => Promise<pg.PoolClient> }).connect = async () => {
    const client = await connect();
    if (!patched.has(client)) {
      patched.add(client);
      const query = client.query.bind(client) as (...args: unknown[]) => Promise<Results>;
      (client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = async (
        ...args: unknown[]
      ) => {
        const first = args[0];
        const text = typeof first === 'string' ? first : (first as { text?: string })?.text;
        const result = await query(...args);
        if (left > 0 && /INSERT INTO/i.test(text ?? '') && /processed_messages/.test(text ?? '')) {
          left--;
          return mangle(result);
        }
        return result;
      };
    }
    return client;
  };
}

const asArray = (r: Results) => (Array.isArray(r) ? r : [r]);

describe('an unexpected result from the claim statement fails closed', () => {
  const mangles: Array<[string, (r: Results) => unknown]> = [
    ['no results at all', () => []],
    ['the INSERT’s result missing', (r) => asArray(r).filter((x) => x.command !== 'INSERT')],
    [
      'every command tag wrong',
      (r) => asArray(r).map((x) => ({ ...x, command: 'SELECT', rowCount: 0, rows: [] })),
    ],
  ];

  it.each(mangles)(
    '%s: never read as a duplicate; EO_DATABASE, retried, then applied once',
    async (_what, mangle) => {
      const pool = extraPool();
      const failures: Array<{ error: EffectivelyOnceError; willRetry: boolean }> = [];
      const h = await memoryHarness(db, { pool });
      h.consumer.on('failed', (f) => failures.push(f));
      await h.consumer.start(); // migrate first: only claims are mangled
      mangleClaims(pool, 2, mangle);
      const message = h.source.send({ id: 'odd', amount: 5 }, { key: 'odd' });
      try {
        await waitFor(() => settled(message), { what: 'settled' });
      } finally {
        await h.consumer.stop();
      }
      expect(message.outcomes).toEqual(['retry', 'retry', 'processed']);
      expect(failures.map((f) => f.error.code)).toEqual(['EO_DATABASE', 'EO_DATABASE']);
      expect(failures.every((f) => f.willRetry)).toBe(true);
      expect(await h.effects()).toEqual([{ id: 'odd', amount: 5 }]);
    },
  );

  it('batch mode, no results at all: no delivery of the batch is acked as a duplicate', async () => {
    const pool = extraPool();
    const h = await memoryHarness(db, { pool, batch: { maxSize: 10, maxWaitMs: 50 } });
    await h.consumer.start();
    mangleClaims(pool, 1, () => []);
    const sent = [
      h.source.send({ id: 'b1', amount: 1 }, { key: 'b1' }),
      h.source.send({ id: 'b2', amount: 2 }, { key: 'b2' }),
    ];
    try {
      await waitFor(() => sent.every(settled), { what: 'settled' });
    } finally {
      await h.consumer.stop();
    }
    expect(sent.flatMap((m) => m.outcomes)).not.toContain('duplicate');
    expect(sent.map((m) => m.outcomes.at(-1))).toEqual(['processed', 'processed']);
    expect(await h.effects()).toEqual([
      { id: 'b1', amount: 1 },
      { id: 'b2', amount: 2 },
    ]);
  });
});

describe('a payload that cannot be hashed', () => {
  it.each([
    ['per message', undefined],
    ['batch mode', { maxSize: 10, maxWaitMs: 5 }],
  ])(
    '%s: a body holding a BigInt (no payload bytes) is dead-lettered with EO_BODY_PARSE, not left unsettled',
    async (_mode, batch) => {
      const source = new ManualSource<{ n: bigint }>();
      let handled = 0;
      const consumer = createConsumer<{ n: bigint }>({
        name: 'bigint',
        source,
        pool: db.pool,
        schema: db.schema,
        ...(batch === undefined ? {} : { batch }),
        handler: async () => void handled++,
      });
      await consumer.start();
      try {
        const result = await source.push({ key: 'big', body: { n: 1n }, payload: undefined });
        expect(result.outcome).toBe('dead-lettered');
        expect(result.calls).toEqual(['deadLetter']);
        expect(result.deadLetterReason?.code).toBe('EO_BODY_PARSE');
        expect(handled).toBe(0);
      } finally {
        await consumer.stop();
      }
    },
  );
});
