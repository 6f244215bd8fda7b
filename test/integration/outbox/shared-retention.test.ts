/**
 * Two relays on one outbox table (two services, or a rolling deploy) with different
 * `retention.olderThanMs`. Unlike a dedup key, a published row guards nothing: the id
 * travels with the message and the downstream dedup keeps it, so the shorter
 * retention deleting the other relay's published rows costs only audit history. What
 * pruning must never do: delete a pending or parked row, publish anything again, or
 * free a key a parked row holds back.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRelay, enqueue, migrateOutbox, type Relay } from 'effectively-once/outbox';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
const relays: Relay[] = [];

beforeAll(async () => {
  db = await createTestDatabase('outbox_shared_retention');
  await migrateOutbox(db.pool, { schema: db.schema });
});

afterAll(async () => {
  for (const relay of relays) await relay.stop();
  await db.close();
});

describe('relays with different retention on one outbox table', () => {
  it("the short one's pruning republishes nothing and leaves pending and parked rows", async () => {
    const published: string[] = [];
    const failing = new Set<string>();
    const long = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: {
        ledger: {
          publish: async (records) => {
            for (const r of records) if (failing.has(r.id)) throw new Error('downstream refused');
            published.push(...records.map((r) => r.id));
          },
        },
      },
      maxAttempts: 1,
      pollIntervalMs: 50,
      retention: { olderThanMs: 3600_000, intervalMs: 86_400_000 },
    });
    const short = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: {
        mail: { publish: async (records) => void published.push(...records.map((r) => r.id)) },
      },
      pollIntervalMs: 50,
      retention: { olderThanMs: 1, intervalMs: 1000 },
    });
    relays.push(long, short);
    const send = (destination: string, orderingKey?: string) =>
      enqueue(
        db.pool,
        { destination, payload: { at: Date.now() }, ...(orderingKey ? { orderingKey } : {}) },
        { schema: db.schema },
      );
    const state = async (id: string): Promise<string | undefined> =>
      (
        await db.pool.query<{ state: string }>(
          `SELECT state FROM ${db.table('eo_outbox')} WHERE id = $1`,
          [id],
        )
      ).rows[0]?.state;

    await long.start();
    await short.start();
    const entry = await send('ledger', 'account-7');
    await waitFor(() => published.includes(entry), { what: 'the ledger entry published' });
    // The next entry of the account is refused downstream and parks (maxAttempts 1).
    const refused = await send('ledger', 'account-7');
    failing.add(refused);
    await waitFor(async () => (await state(refused)) === 'parked', { what: 'the entry parked' });
    // A later entry of the account waits behind the parked one.
    const held = await send('ledger', 'account-7');
    const mail = await send('mail');
    await waitFor(() => published.includes(mail), { what: 'the mail published' });
    // The short relay's pruner has run since: every published row is gone, its own and
    // the long relay's alike (audit history only).
    await waitFor(
      async () => (await state(mail)) === undefined && (await state(entry)) === undefined,
      {
        what: 'published rows pruned',
      },
    );
    await sleep(300);
    expect(await state(refused)).toBe('parked');
    expect(await state(held)).toBe('pending');
    // Nothing was published twice, and the held entry is still held.
    expect(published.filter((id) => id === entry)).toHaveLength(1);
    expect(published).toEqual([entry, mail]);
  }, 30_000);
});
