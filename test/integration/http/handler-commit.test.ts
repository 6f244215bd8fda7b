import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { createIdempotency } from 'effectively-once/http';
import { FRAMEWORKS } from '../../helpers/http/payments.js';
import { appFixture, startApp } from './apps.js';
import { post } from './support.js';

const fixture = appFixture('http_handler_commit', 'CREATE TABLE orders (key text NOT NULL)');

describe.each(FRAMEWORKS)('%s: a handler that commits the transaction itself', (framework) => {
  it("tx.query('INSERT …; COMMIT'): the first answer is stored, every retry replays it", async () => {
    const warnings: string[] = [];
    const db = fixture.db();
    const idempotency = fixture.track(
      createIdempotency({
        pool: db.pool,
        scope: 'public',
        schema: db.schema,
        logger: {
          debug: () => undefined,
          info: () => undefined,
          warn: (_obj, msg) => warnings.push(msg ?? ''),
          error: () => undefined,
        },
      }),
    );
    const app = fixture.track(
      await startApp({
        framework,
        idempotency,
        run: async (ctx) => {
          // Multi-statement text ends the claim's transaction from inside: it committed.
          await ctx.tx.query(`INSERT INTO orders (key) VALUES ('${ctx.key}'); COMMIT`);
          return { status: 201, body: { order: ctx.key } };
        },
      }),
    );
    const key = randomUUID();
    const first = await post(`${app.url}/run`, key, {});
    expect(first.status).toBe(201);
    for (let i = 0; i < 3; i++) {
      const retry = await post(`${app.url}/run`, key, {});
      expect(retry).toMatchObject({ status: 201, body: first.body });
      expect(retry.headers['idempotent-replayed']).toBe('true');
    }
    const { rows } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM orders WHERE key = $1',
      [key],
    );
    expect(rows[0]?.n).toBe(1);
    expect(warnings).toContain('effectively-once: committed oddly');
  });

  it.each([
    ['throws', 'throw'],
    ['answers a 5xx', '503'],
  ] as const)(
    "tx.query('INSERT …; COMMIT'), then %s: one answer, stored and replayed; never run again",
    async (_name, failure) => {
      const db = fixture.db();
      const idempotency = fixture.track(
        createIdempotency({ pool: db.pool, scope: 'public', schema: db.schema }),
      );
      let runs = 0;
      const app = fixture.track(
        await startApp({
          framework,
          idempotency,
          run: async (ctx) => {
            runs++;
            await ctx.tx.query(`INSERT INTO orders (key) VALUES ('${ctx.key}'); COMMIT`);
            if (failure === 'throw') throw new Error('the mailer is down');
            return { status: 503, body: { error: 'the mailer is down' } };
          },
        }),
      );
      const key = randomUUID();
      const first = await post(`${app.url}/run`, key, {});
      expect(first.status).toBe(500);
      expect(JSON.parse(String(first.body))).toMatchObject({ code: 'EO_TX_CONTROL' });
      for (let i = 0; i < 2; i++) {
        const retry = await post(`${app.url}/run`, key, {});
        expect(retry).toMatchObject({ status: 500, body: first.body });
        expect(retry.headers['idempotent-replayed']).toBe('true');
      }
      expect(runs).toBe(1);
      const { rows } = await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM orders WHERE key = $1',
        [key],
      );
      expect(rows[0]?.n).toBe(1);
    },
  );
});
