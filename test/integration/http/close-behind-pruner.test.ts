/**
 * close({ timeoutMs }) awaits the background pruner's stop before its grace
 * timer even starts. A prune tick waiting for a pool connection (the pool is busy with
 * in-flight requests; pg waits for a client without bound by default) is not aborted by
 * stop(), so the grace period and the hard stop never come while the requests hold the
 * connections: close() hangs, and a handler waiting on ctx.signal (the hard stop) waits
 * for ever with `timeoutMs: 0` (no handler timeout), or until its own timeout.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createIdempotency } from 'effectively-once/http';
import { databaseUrl } from '../../helpers/db.js';
import { waitFor, within } from '../../helpers/wait-for.js';
import { appFixture, startApp } from './apps.js';
import { gate } from './support.js';

const fixture = appFixture('attack_close_pruner', 'CREATE TABLE charges (key text NOT NULL)');

describe('close() with a prune tick queued behind busy connections', () => {
  it('reaches its hard stop within its timeout', async () => {
    const db = fixture.db();
    const pool = new pg.Pool({
      connectionString: databaseUrl(),
      max: 1,
      options: `-c search_path=${db.schema}`,
    });
    pool.on('error', () => undefined);
    const idempotency = createIdempotency({
      pool,
      schema: db.schema,
      scope: 'public',
      handlerTimeoutMs: 0,
      retention: { intervalMs: 100 },
    });
    const release = gate();
    let entered = false;
    let signalled = false;
    const app = await startApp({
      framework: 'hono',
      idempotency,
      run: async (ctx) => {
        entered = true;
        ctx.signal.addEventListener('abort', () => (signalled = true), { once: true });
        await ctx.tx.query('INSERT INTO charges (key) VALUES ($1)', [ctx.key]);
        await Promise.race([
          release.wait,
          new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true })),
        ]);
        return { status: 201, body: { ok: true } };
      },
    });
    try {
      const answered = fetch(`${app.url}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() },
        body: '{}',
      }).then((r) => r.status);
      await waitFor(() => entered, { what: 'the handler' });
      // The pruner's tick is queued for the pool's only connection.
      await waitFor(() => pool.waitingCount > 0, { what: 'a prune tick waiting for the pool' });
      const closed = idempotency.close({ timeoutMs: 200 });
      // Liveness bound, far past the 200 ms grace.
      const outcome = await within(closed, 10_000);
      expect({ outcome, signalled }).toEqual({ outcome: undefined, signalled: true });
      expect([503, 201]).toContain(await answered);
    } finally {
      release.open();
      await idempotency.close();
      await app.close();
      await pool.end();
    }
  });
});
