import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { createIdempotency } from 'effectively-once/http';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { appFixture, startApp } from './apps.js';
import { post } from './support.js';

const fixture = appFixture('http_handler_commit', 'CREATE TABLE orders (key text NOT NULL)');

describe.each(FRAMEWORKS)(
  '%s: a handler that tries to commit the transaction itself',
  (framework) => {
    it.each([
      ['then answers', 'answer'],
      ['then throws', 'throw'],
    ] as const)(
      "tx.query('INSERT …; COMMIT') %s: refused before anything is sent; nothing committed, the key stays free",
      async (_name, after) => {
        const db = fixture.db();
        const idempotency = fixture.track(
          createIdempotency({ pool: db.pool, scope: 'public', schema: db.schema }),
        );
        const refusals: string[] = [];
        const app = fixture.track(
          await startApp({
            framework,
            idempotency,
            run: async (ctx) => {
              // Sent, the INSERT and COMMIT would commit the claim without its answer; what
              // the handler wrote next would autocommit, and a failure could not undo it.
              await ctx.tx
                .query(`INSERT INTO orders (key) VALUES ('${ctx.key}'); COMMIT`)
                .catch((error: { code?: string }) => {
                  refusals.push(error.code ?? 'no code');
                  if (after === 'throw') throw error;
                });
              await ctx.tx.query('INSERT INTO orders (key) VALUES ($1)', [`${ctx.key}-after`]);
              return { status: 201, body: { order: ctx.key } };
            },
          }),
        );
        const key = randomUUID();
        const first = await post(`${app.url}/run`, key, {});
        const orders = async (): Promise<string[]> =>
          (
            await db.pool.query<{ key: string }>(
              'SELECT key FROM orders WHERE key LIKE $1 ORDER BY key',
              [`${key}%`],
            )
          ).rows.map((r) => r.key);
        expect(refusals).toEqual(['EO_TX_CONTROL']);
        if (after === 'answer') {
          // The handler went on in the claim's transaction: one effect, stored, replayed.
          expect(first.status).toBe(201);
          const retry = await post(`${app.url}/run`, key, {});
          expect(retry).toMatchObject({ status: 201, body: first.body });
          expect(retry.headers['idempotent-replayed']).toBe('true');
          expect(await orders()).toEqual([`${key}-after`]);
        } else {
          expect(first.status).toBe(500);
          expect(first.headers['idempotent-replayed']).toBeUndefined();
          expect(await orders()).toEqual([]);
          const retry = await post(`${app.url}/run`, key, {});
          expect(retry.status).toBe(500);
          expect(retry.headers['idempotent-replayed']).toBeUndefined();
          expect(refusals).toEqual(['EO_TX_CONTROL', 'EO_TX_CONTROL']);
          expect(await orders()).toEqual([]);
        }
      },
    );
  },
);
