/**
 * "Rows of one key are published in commit order" with transactions that overlap: two
 * transactions enqueue a row of one key, and the second tries to commit first. The
 * ground truth of commit order is a counter row each transaction updates after its
 * enqueue and holds locked until its COMMIT, so its values rise in commit order.
 */
import { beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type pg from 'pg';
import { enqueue, type EnqueueOptions } from 'effectively-once/outbox';
import type { TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import { outboxTestBed } from './support.js';

const bed = outboxTestBed('outbox_commit_order');
const db = (): TestDatabase => bed.db;
const startRelay = (): Promise<void> => bed.relay().start();
const KEYS = Array.from({ length: 10 }, (_, i) => `acct-${i}`);

beforeAll(async () => {
  await db().pool.query(
    `CREATE TABLE ${db().table('counters')} (k text PRIMARY KEY, n int NOT NULL)`,
  );
  await db().pool.query(
    `CREATE TABLE ${db().table('committed')} (outbox_id uuid PRIMARY KEY, k text NOT NULL, n int NOT NULL)`,
  );
});

beforeEach(async () => {
  await db().pool.query(`TRUNCATE ${db().table('counters')}, ${db().table('committed')}`);
});

/** Whether `pid`'s current statement waits for a lock. */
async function blocked(pid: number): Promise<boolean> {
  const { rows } = await db().pool.query<{ waiting: boolean }>(
    `SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = $1`,
    [pid],
  );
  return rows[0]?.waiting === true;
}

/** After its enqueue, a transaction takes the key's next counter value and commits. */
async function finish(client: pg.PoolClient, k: string, id: string): Promise<void> {
  const { rows } = await client.query<{ n: number }>(
    `INSERT INTO ${db().table('counters')} (k, n) VALUES ($1, 1)
     ON CONFLICT (k) DO UPDATE SET n = counters.n + 1 RETURNING n`,
    [k],
  );
  await client.query(
    `INSERT INTO ${db().table('committed')} (outbox_id, k, n) VALUES ($1, $2, $3)`,
    [id, k, rows[0]!.n],
  );
  await client.query('COMMIT');
}

/**
 * a enqueues first, b second; b then commits as soon as the database lets it, and a
 * after that. Returns whether b's enqueue had to wait for a.
 */
async function overlap(k: string, options: EnqueueOptions): Promise<boolean> {
  const a = await db().pool.connect();
  const b = await db().pool.connect();
  try {
    const bPid = (await b.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await a.query('BEGIN');
    await b.query('BEGIN');
    const idA = await enqueue(
      a,
      { destination: 'effects', orderingKey: k, payload: { k, by: 'a' } },
      options,
    );
    let bCommitted = false;
    const bDone = (async () => {
      const idB = await enqueue(
        b,
        { destination: 'effects', orderingKey: k, payload: { k, by: 'b' } },
        options,
      );
      await finish(b, k, idB);
      bCommitted = true;
    })();
    // b goes as far as the database lets it: its COMMIT, or a wait for a lock.
    const waited = await waitFor(async () =>
      bCommitted ? 'no' : (await blocked(bPid)) ? 'yes' : undefined,
    );
    await finish(a, k, idA);
    await bDone;
    return waited === 'yes';
  } finally {
    a.release();
    b.release();
  }
}

/** Per key, the counter values of the published rows in publishing order. */
async function publishedOrder(): Promise<Map<string, number[]>> {
  const { rows } = await db().pool.query<{ outbox_id: string; k: string; n: number }>(
    `SELECT outbox_id::text, k, n FROM ${db().table('committed')}`,
  );
  const byId = new Map(rows.map((r) => [r.outbox_id, r]));
  const order = new Map<string, number[]>();
  for (const { key } of bed.receiver.accepted) {
    const row = byId.get(key)!;
    order.set(row.k, [...(order.get(row.k) ?? []), row.n]);
  }
  return order;
}

const inCommitOrder = new Map(KEYS.map((k) => [k, [1, 2]]));

describe('commit order with overlapping transactions of one key (the default)', () => {
  it('publishes in commit order when the relay is behind (starts after both commits)', async () => {
    const waited = [];
    for (const k of KEYS) waited.push(await overlap(k, { schema: db().schema }));
    await startRelay();
    await waitFor(() => bed.receiver.accepted.length === 2 * KEYS.length, {
      what: 'all published',
    });
    expect(await publishedOrder()).toEqual(inCommitOrder);
    // b's enqueue waited for a's COMMIT: the key's transactions were serialised.
    expect(waited).toEqual(KEYS.map(() => true));
  });

  it('publishes in commit order when the relay keeps up (running throughout)', async () => {
    await startRelay();
    const waited = [];
    for (const k of KEYS) waited.push(await overlap(k, { schema: db().schema }));
    await waitFor(() => bed.receiver.accepted.length === 2 * KEYS.length, {
      what: 'all published',
    });
    expect(await publishedOrder()).toEqual(inCommitOrder);
    expect(waited).toEqual(KEYS.map(() => true));
  });
});

describe("order: 'enqueue' (the opt-out)", () => {
  it('takes no lock, and publishes overlapping transactions in enqueue order', async () => {
    const waited = [];
    for (const k of KEYS) waited.push(await overlap(k, { schema: db().schema, order: 'enqueue' }));
    expect(waited).toEqual(KEYS.map(() => false));
    await startRelay();
    await waitFor(() => bed.receiver.accepted.length === 2 * KEYS.length, {
      what: 'all published',
    });
    // b committed first (counter 1) but enqueued second: published after a.
    expect(await publishedOrder()).toEqual(new Map(KEYS.map((k) => [k, [2, 1]])));
  });
});

describe('what the key lock holds back', () => {
  it('only transactions of the same destination and key, until the holder ends', async () => {
    const holder = await db().pool.connect();
    const other = await db().pool.connect();
    try {
      await holder.query('BEGIN');
      await enqueue(
        holder,
        { destination: 'effects', orderingKey: 'hot', payload: {} },
        { schema: db().schema },
      );
      // Another key, another destination with the same key, no key: none waits.
      for (const message of [
        { destination: 'effects', orderingKey: 'cold', payload: {} },
        { destination: 'audit', orderingKey: 'hot', payload: {} },
        { destination: 'effects', payload: {} },
      ]) {
        await other.query('BEGIN');
        await enqueue(other, message, { schema: db().schema });
        await other.query('COMMIT');
      }
      // The same key waits until the holder rolls back.
      const otherPid = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))
        .rows[0]!.pid;
      await other.query('BEGIN');
      const waiting = enqueue(
        other,
        { destination: 'effects', orderingKey: 'hot', payload: {} },
        { schema: db().schema },
      );
      await waitFor(() => blocked(otherPid), { what: 'the same key waiting' });
      await holder.query('ROLLBACK');
      await waiting;
      await other.query('COMMIT');
    } finally {
      holder.release();
      other.release();
    }
    const { rows } = await db().pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${db().table('eo_outbox')}`,
    );
    expect(rows[0]!.n).toBe(4);
  });
});
