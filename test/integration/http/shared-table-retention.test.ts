import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  createIdempotency,
  type Idempotency,
  type IdempotencyContext,
  type IdempotencyOptions,
  pruneIdempotencyKeys,
} from 'effectively-once/http';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

// The docs let configurations share one key table ("they may share the key table"), and
// nothing stops two services on one database from using the default table, or a rolling
// deploy from running two `retention`s side by side. Each key must stay valid at least
// as long as the configuration that wrote it promised, whoever prunes.

// The background pruners never tick in these tests: each prune is called directly.
const QUIET = 86_400_000;

describe('configurations sharing one key table with different retention', () => {
  let db: TestDatabase;
  const open: Idempotency[] = [];
  beforeAll(async () => {
    db = await createTestDatabase('http_shared_retention');
    await db.pool.query('CREATE TABLE effects (k text NOT NULL)');
  });
  afterAll(async () => {
    for (const idempotency of open) await idempotency.close();
    await db.close();
  });

  const endpoint = (
    table: string,
    scope: string,
    retention: IdempotencyOptions['retention'],
  ): Idempotency => {
    const idempotency = createIdempotency({
      pool: db.pool,
      scope,
      schema: db.schema,
      table,
      retention,
    });
    open.push(idempotency);
    return idempotency;
  };
  const call = (idempotency: Idempotency, key: string) =>
    idempotency.handle(
      new Request('http://localhost/payouts', {
        method: 'POST',
        headers: { 'idempotency-key': key },
        body: '{}',
      }),
      async (_request, ctx: IdempotencyContext) => {
        await ctx.tx.query('INSERT INTO effects (k) VALUES ($1)', [ctx.key]);
        return new Response('paid', { status: 201 });
      },
    );
  const effects = async (k: string): Promise<number> =>
    (await db.pool.query('SELECT 1 FROM effects WHERE k = $1', [k])).rowCount ?? -1;
  /** Waits (on the database's clock, not a guess of speed) until every row is older than `ms`. */
  const untilOlderThan = async (table: string, ms: number): Promise<void> => {
    for (;;) {
      const { rows } = await db.pool.query<{ young: boolean }>(
        `SELECT coalesce(max(created_at) > now() - $1::double precision * interval '1 millisecond', false) AS young
           FROM ${db.table(table)}`,
        [ms],
      );
      if (rows[0]?.young !== true) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  it.each([
    ['one app, one scope (the docs: two configurations may share the key table)', 'app', 'app'],
    ['two services on one database, one table', 'billing', 'shipping'],
    ['a rolling deploy: the old retention beside the new one', 'deploy', 'deploy'],
  ])(
    "%s: the short retention prunes its own keys, never the long one's",
    async (_shape, longScope, shortScope) => {
      const table = `eo_keys_${longScope}`;
      const long = endpoint(table, longScope, { olderThanMs: 3600_000, intervalMs: QUIET });
      const short = endpoint(table, shortScope, { olderThanMs: 1000, intervalMs: QUIET });
      const payout = randomUUID();
      const ping = randomUUID();
      expect((await call(long, payout)).status).toBe(201);
      expect((await call(short, ping)).status).toBe(201);
      await untilOlderThan(table, 1500);
      // The short configuration's pruner: its own key's time is up, the payout's is not.
      const pruned = await short.prune();
      // A retry of the payout within its hour replays; it does not pay again.
      const retry = await call(long, payout);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(await effects(payout)).toBe(1);
      expect(pruned).toBe(1);
      // The short key was pruned as its configuration said: it runs afresh.
      expect((await call(short, ping)).headers.get('idempotent-replayed')).toBeNull();
      expect(await effects(ping)).toBe(2);
    },
  );

  it('a configuration with retention: false keeps its keys from every other pruner', async () => {
    const table = 'eo_keys_kept';
    const kept = endpoint(table, 'kept', false);
    const short = endpoint(table, 'kept', { olderThanMs: 1000, intervalMs: QUIET });
    const key = randomUUID();
    expect((await call(kept, key)).status).toBe(201);
    await untilOlderThan(table, 1500);
    await short.prune();
    expect((await call(kept, key)).headers.get('idempotent-replayed')).toBe('true');
    expect(await effects(key)).toBe(1);
  });

  it("a rolling deploy from before expires_at: the new side's pruner keeps the old side's keys", async () => {
    // The old side (the version before expires_at, 7 d) claims through `_claim_v1`, which
    // writes no expiry; the new side (1 h) prunes. Its row as that claim leaves it: the
    // expiry cleared, claimed 2 h ago (database clock), well within the old side's 7 days.
    const table = 'eo_keys_rolling_legacy';
    const oldSide = endpoint(table, 'deploy', { olderThanMs: 7 * 86_400_000, intervalMs: QUIET });
    const newSide = endpoint(table, 'deploy', { olderThanMs: 3600_000, intervalMs: QUIET });
    const payout = randomUUID();
    expect((await call(oldSide, payout)).status).toBe(201);
    await db.pool.query(
      `UPDATE ${db.table(table)} SET expires_at = NULL, created_at = now() - interval '2 hours'
        WHERE idempotency_key = $1`,
      [payout],
    );
    await newSide.prune();
    // The client's retry replays; it does not pay again.
    const retry = await call(oldSide, payout);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await effects(payout)).toBe(1);
  });

  /** A row of unknown lifetime (no expiry, as no claim writes it), claimed `age` ago. */
  const legacyRow = async (table: string, key: string, age: string): Promise<void> => {
    await db.pool.query(
      `INSERT INTO ${db.table(table)} (scope, idempotency_key, method, route, fingerprint, status, headers, body, created_at)
       VALUES ('old', $1, 'POST', '/payouts', '\\x00', 201, '{}', 'paid', now() - $2::interval)`,
      [key, age],
    );
  };
  const keys = async (table: string): Promise<string[]> =>
    (
      await db.pool.query<{ k: string }>(
        `SELECT idempotency_key AS k FROM ${db.table(table)} ORDER BY 1`,
      )
    ).rows.map((r) => r.k);

  it('rows of unknown lifetime: no prune without a window deletes them; one with a window does', async () => {
    const table = 'eo_keys_legacy';
    const hourly = endpoint(table, 'new', { olderThanMs: 3600_000, intervalMs: QUIET });
    await hourly.migrate();
    await legacyRow(table, 'legacy-2h', '2 hours');
    await legacyRow(table, 'legacy-30m', '30 minutes');
    // Older than this pruner's hour, but written under a retention it cannot know: kept.
    expect(await hourly.prune()).toBe(0);
    expect(await pruneIdempotencyKeys(db.pool, { schema: db.schema, table })).toBe(0);
    expect(await keys(table)).toEqual(['legacy-2h', 'legacy-30m']);
    // The operator's window (the longest retention that wrote to the table) removes
    // those older than it; never a key before its own expiry.
    const long = endpoint(table, 'new', { olderThanMs: 3 * 3600_000, intervalMs: QUIET });
    const key = randomUUID();
    expect((await call(long, key)).status).toBe(201);
    expect(await hourly.prune({ olderThan: 3600_000 })).toBe(1);
    expect(await keys(table)).toEqual([key, 'legacy-30m'].sort());
    expect(await hourly.prune({ olderThan: 1000 })).toBe(1);
    expect(await keys(table)).toEqual([key]);
  });
});
