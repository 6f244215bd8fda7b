/**
 * A handler that answers with a statement still running on `ctx.tx` (sent, never
 * awaited): the COMMIT would queue behind it. What it left running counts against
 * `timeoutMs` like the handler itself: past it the request is answered 503, the
 * statement is cancelled, nothing commits and the key is free for the retry.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { createIdempotency } from 'effectively-once/http';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { appFixture, startApp } from './apps.js';
import { post } from './support.js';

const fixture = appFixture('http_floating_statements', 'CREATE TABLE effects (key text NOT NULL)');

describe.each(FRAMEWORKS)('%s: a statement left running when the handler answered', (framework) => {
  it('is bounded by timeoutMs: 503, nothing committed, and the retry runs afresh', async () => {
    const db = fixture.db();
    let runs = 0;
    const app = fixture.track(
      await startApp({
        framework,
        idempotency: fixture.track(
          createIdempotency({ pool: db.pool, schema: db.schema, scope: 't', handlerTimeoutMs: 500 }),
        ),
        run: async (ctx) => {
          await ctx.tx.query('INSERT INTO effects (key) VALUES ($1)', [ctx.key]);
          // The first run leaves a long statement floating and answers at once.
          if (++runs === 1) void ctx.tx.query('SELECT pg_sleep(600)').catch(() => undefined);
          return { status: 201, body: { run: runs } };
        },
      }),
    );
    const key = randomUUID();
    const first = await Promise.race([
      post(`${app.url}/run`, key, {}),
      new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 15_000)),
    ]);
    expect(first === 'hung' ? first : first.status).toBe(503);
    const effects = async () =>
      (await db.pool.query<{ key: string }>('SELECT key FROM effects WHERE key = $1', [key])).rows;
    expect(await effects()).toEqual([]);
    const retry = await post(`${app.url}/run`, key, {});
    expect([retry.status, JSON.parse(retry.body)]).toEqual([201, { run: 2 }]);
    expect(await effects()).toEqual([{ key }]);
  });
});
