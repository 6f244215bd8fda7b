import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createConsumer, migrate, prune, type Consumer } from '../../../src/index.js';
import { memorySource, type MemorySource } from '../../../src/testing/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';

// Consumers share the dedup table, namespaced by `name`. Two configurations of one name
// (a rolling deploy that changes `retention`, or two deployments of one consumer) and
// two names side by side may each run a pruner: each key must stay deduplicated at
// least as long as the configuration that processed it promised.

type Body = { n: number };

describe('consumers sharing the dedup table with different retention', () => {
  let db: TestDatabase;
  const running: Consumer[] = [];
  beforeAll(async () => {
    db = await createTestDatabase('core_shared_retention');
    await db.pool.query('CREATE TABLE effects (k text NOT NULL)');
  });
  afterAll(async () => {
    for (const consumer of running) await consumer.stop();
    await db.close();
  });

  const consumer = async (
    name: string,
    source: MemorySource<Body>,
    retention: { olderThanMs: number; intervalMs: number },
  ): Promise<Consumer> => {
    const started = createConsumer<Body>({
      name,
      source,
      pool: db.pool,
      schema: db.schema,
      retention,
      handler: async (_body, { tx, key }) => {
        await tx.query('INSERT INTO effects (k) VALUES ($1)', [key]);
      },
    });
    running.push(started);
    await started.start();
    return started;
  };
  const effects = async (k: string): Promise<number> =>
    (await db.pool.query('SELECT 1 FROM effects WHERE k = $1', [k])).rowCount ?? -1;
  const row = async (name: string, key: string): Promise<boolean> =>
    ((
      await db.pool.query(
        `SELECT 1 FROM ${db.table('processed_messages')} WHERE consumer = $1 AND message_key = $2`,
        [name, key],
      )
    ).rowCount ?? 0) > 0;
  const settled = (source: MemorySource<Body>, key: string) =>
    waitFor(
      () => source.messages.filter((m) => m.options.key === key).every((m) => m.state === 'acked'),
      { what: `${key} acked` },
    );
  // The long configuration's pruner never ticks here; the short one's every 100 ms.
  const LONG = { olderThanMs: 3600_000, intervalMs: 86_400_000 };
  const SHORT = { olderThanMs: 1, intervalMs: 100 };

  it.each([
    ['one name, two retentions (a rolling deploy)', 'payouts', 'payouts'],
    ['two names on one table', 'billing', 'shipping'],
  ])(
    "%s: the short one's pruner never deletes the long one's keys",
    async (_shape, longName, shortName) => {
      const longSource = memorySource<Body>();
      const shortSource = memorySource<Body>();
      const payout = `payout-${longName}`;
      const ping = `ping-${shortName}`;
      await consumer(longName, longSource, LONG);
      longSource.send({ n: 1 }, { key: payout });
      await settled(longSource, payout);
      await consumer(shortName, shortSource, SHORT);
      shortSource.send({ n: 2 }, { key: ping });
      await settled(shortSource, ping);
      // The short pruner has run since: its own key is gone.
      await waitFor(async () => !(await row(shortName, ping)), { what: `${ping} pruned` });
      // The payout is redelivered within its hour: a duplicate, not a second payout.
      longSource.send({ n: 1 }, { key: payout });
      await settled(longSource, payout);
      expect(await effects(payout)).toBe(1);
      expect(await row(longName, payout)).toBe(true);
    },
  );

  it("a scheduled prune with a shorter window never deletes a key before its consumer's retention", async () => {
    const source = memorySource<Body>();
    await consumer('ledger', source, LONG);
    source.send({ n: 3 }, { key: 'entry' });
    await settled(source, 'entry');
    await prune(db.pool, { schema: db.schema, consumer: 'ledger', olderThan: 0 });
    expect(await row('ledger', 'entry')).toBe(true);
  });

  it("a rolling deploy from before expires_at: the new side's pruner keeps the old side's keys", async () => {
    // The old side (the version before expires_at, 7 d) processed the payout and left no
    // expiry; the new side (1 h, pruning every 100 ms) runs beside it.
    const oldSource = memorySource<Body>();
    await consumer('refunds', oldSource, { olderThanMs: 7 * 86_400_000, intervalMs: 86_400_000 });
    oldSource.send({ n: 4 }, { key: 'refund' });
    await settled(oldSource, 'refund');
    // As that version's claim leaves its row: no expiry; processed 2 h ago.
    await db.pool.query(
      `UPDATE ${db.table('processed_messages')} SET expires_at = NULL, processed_at = now() - interval '2 hours'
        WHERE consumer = 'refunds' AND message_key = 'refund'`,
    );
    // An expired key, so that a run of the new side's pruner shows (it reports only deletions).
    await db.pool.query(
      `INSERT INTO ${db.table('processed_messages')} (consumer, message_key, expires_at)
       VALUES ('refunds', 'expired', now() - interval '1 second')`,
    );
    const newSide = await consumer('refunds', memorySource<Body>(), {
      olderThanMs: 3600_000,
      intervalMs: 100,
    });
    await waitFor(() => newSide.stats().pruned > 0, { what: "the new side's pruner ran" });
    expect(await row('refunds', 'expired')).toBe(false);
    // Redelivered within the old side's 7 days: a duplicate, not a second refund.
    oldSource.send({ n: 4 }, { key: 'refund' });
    await settled(oldSource, 'refund');
    expect(await effects('refund')).toBe(1);
    expect(await row('refunds', 'refund')).toBe(true);
  });

  it('a consumer without retention adds nothing to the expiry index (its rows never expire)', async () => {
    const table = 'processed_forever';
    const source = memorySource<Body>();
    const forever = createConsumer<Body>({
      name: 'forever',
      source,
      pool: db.pool,
      schema: db.schema,
      table,
      handler: async () => undefined,
    });
    running.push(forever);
    await forever.start();
    for (let i = 0; i < 50; i++) source.send({ n: i }, { key: `k${i}` });
    await waitFor(() => source.messages.every((m) => m.state === 'acked'), { what: 'all acked' });
    const { rows } = await db.pool.query<{ bytes: number; infinite: number }>(
      `SELECT pg_relation_size($1::regclass)::int AS bytes,
              (SELECT count(*)::int FROM ${db.table(table)} WHERE expires_at = 'infinity') AS infinite`,
      [`${db.schema}.${table}_expires_at_idx`],
    );
    // An empty B-tree is its metapage alone: no entry went in for these 50 claims.
    expect(rows[0]).toEqual({ bytes: 8192, infinite: 50 });
  });

  it('rows of unknown lifetime add nothing to the expiry index (only a window prunes them)', async () => {
    const table = 'processed_legacy';
    await migrate(db.pool, { schema: db.schema, table });
    // 50 claims as the version before expires_at makes them: no expiry.
    await db.pool.query(
      `INSERT INTO ${db.table(table)} (consumer, message_key)
       SELECT 'legacy', 'k' || i FROM generate_series(1, 50) AS i`,
    );
    const { rows } = await db.pool.query<{ bytes: number; unknown: number }>(
      `SELECT pg_relation_size($1::regclass)::int AS bytes,
              (SELECT count(*)::int FROM ${db.table(table)} WHERE expires_at IS NULL) AS unknown`,
      [`${db.schema}.${table}_expires_at_idx`],
    );
    // An empty B-tree is its metapage alone: no entry went in for these 50 rows.
    expect(rows[0]).toEqual({ bytes: 8192, unknown: 50 });
  });
});
