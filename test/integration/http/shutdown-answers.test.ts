/**
 * What `close()`'s hard stop answers, and what it lets start: a COMMIT it gives up on is
 * `outcome-unknown` (never "nothing was applied"), a claim waiting on a key another
 * instance holds is cancelled with it, and no handler starts after it.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createIdempotency, type Idempotency } from 'effectively-once/http';
import { databaseUrl } from '../../helpers/db.js';
import { waitFor, within } from '../../helpers/wait-for.js';
import { appFixture, startApp, type App, type Run } from './apps.js';
import { arrivals, gate, post } from './support.js';

// A row of `held` is checked at COMMIT by a deferred trigger that takes advisory lock 31:
// while a test session holds it, the COMMIT waits on the server, on the wire.
const fixture = appFixture(
  'http_shutdown_answers',
  `CREATE TABLE held (id text NOT NULL);
   CREATE FUNCTION held_check() RETURNS trigger LANGUAGE plpgsql AS
     $$ BEGIN PERFORM pg_advisory_xact_lock(31); RETURN NULL; END $$;
   CREATE CONSTRAINT TRIGGER held_at_commit AFTER INSERT ON held
     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION held_check();`,
);

async function endpoint(
  run: Run,
  options: { lockTimeoutMs?: number } = {},
): Promise<{ idempotency: Idempotency; app: App; arrived: () => number }> {
  const db = fixture.db();
  const seen = arrivals();
  const idempotency = fixture.track(
    createIdempotency({
      pool: db.pool,
      schema: db.schema,
      scope: 's',
      telemetry: seen.telemetry,
      ...options,
    }),
  );
  const app = fixture.track(await startApp({ framework: 'hono', idempotency, run }));
  return { idempotency, app, arrived: seen.count };
}

/** Backends of this test's schema waiting on a lock, with the statement they run. */
async function lockWaits(match: string): Promise<number> {
  const { rows } = await fixture.db().pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND query LIKE $1`,
    [`%${match}%`],
  );
  return rows[0]?.n ?? 0;
}

/** A session of its own (outside the endpoints' pool) holding advisory lock 31. */
async function holdLock31(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  await client.connect();
  await client.query('SELECT pg_advisory_lock(31)');
  return client;
}

describe('close() and the requests in flight at its hard stop', () => {
  it('a COMMIT still on the wire at the hard stop is answered outcome-unknown', async () => {
    const lock = await holdLock31();
    try {
      const { idempotency, app } = await endpoint(async (ctx) => {
        await ctx.tx.query('INSERT INTO held (id) VALUES ($1)', [ctx.key]);
        return { status: 201, body: { ok: true } };
      });
      const key = randomUUID();
      const answer = post(`${app.url}/run`, key, { n: 1 });
      await waitFor(async () => (await lockWaits('COMMIT')) > 0, { what: 'a COMMIT waiting' });
      await idempotency.close({ timeoutMs: 50 });
      const got = await answer;
      expect(got.status).toBe(503);
      expect(JSON.parse(got.body)).toMatchObject({ code: 'EO_COMMIT_UNKNOWN' });
      expect(got.headers['retry-after']).toBeDefined();
    } finally {
      await lock.end();
    }
  });

  it("the hard stop cancels a claim waiting on another instance's key", async () => {
    const entered = gate();
    const hold = gate();
    const holder = await endpoint(async () => {
      entered.open();
      await hold.wait;
      return { status: 201, body: { by: 'holder' } };
    });
    let ran = 0;
    // The longest wait allowed: only the hard stop can end it in this test.
    const waiter = await endpoint(
      async () => {
        ran++;
        return { status: 201, body: { by: 'waiter' } };
      },
      { lockTimeoutMs: 3_600_000 },
    );
    const key = randomUUID();
    const original = post(`${holder.app.url}/run`, key, { n: 1 });
    try {
      await entered.wait;
      const retry = post(`${waiter.app.url}/run`, key, { n: 1 });
      await waitFor(async () => (await lockWaits('_claim_v1')) > 0, { what: 'a waiting claim' });
      expect(await within(waiter.idempotency.close({ timeoutMs: 50 }), 15_000)).toBeUndefined();
      const got = await retry;
      expect(got.status).toBe(503);
      expect(JSON.parse(got.body)).toMatchObject({ code: 'EO_SHUTDOWN' });
      expect(ran).toBe(0);
    } finally {
      hold.open();
    }
    expect((await original).status).toBe(201);
  });

  it('no handler starts after the hard stop, not even a retry the original freed', async () => {
    const entered = gate();
    const hold = gate();
    let starts = 0;
    // The original ignores its signal: the hard stop abandons it and destroys its
    // connection, which frees its key's row lock.
    const { idempotency, app, arrived } = await endpoint(async () => {
      starts++;
      entered.open();
      await hold.wait;
      return { status: 201, body: {} };
    });
    const key = randomUUID();
    const original = post(`${app.url}/run`, key, { n: 1 });
    try {
      await entered.wait;
      const retry = post(`${app.url}/run`, key, { n: 1 });
      // The retry waits behind the original, in this process (see KeyFlights).
      await waitFor(() => arrived() === 2, { what: 'the retry waiting on the original' });
      await idempotency.close({ timeoutMs: 50 });
      const answers = await Promise.all([original, retry]);
      expect(answers.map((a) => a.status)).toEqual([503, 503]);
      expect(starts).toBe(1);
    } finally {
      hold.open();
    }
  });
});
