/**
 * The engine's paths for a handler that committed the claim's transaction itself. The
 * guard refuses COMMIT in any SQL text it can read; a hand-made submittable has none
 * (it writes to the connection itself), so it is how a handler gets there. The key row
 * then committed without its response: the engine must store one after the fact, so that
 * a retry replays instead of meeting an incomplete row.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { createIdempotency } from 'effectively-once/http';
import { FRAMEWORKS } from '../../../kit/payments/payments.js';
import { appFixture, startApp } from './apps.js';
import { post } from './support.js';

const fixture = appFixture('http_own_commit', 'CREATE TABLE orders (key text NOT NULL)');

/** A pg submittable with no SQL text for the guard to read: it sends COMMIT itself. */
class RawCommit {
  readonly done: Promise<void>;
  private settle!: (error?: Error) => void;

  constructor() {
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = (error) => (error === undefined ? resolve() : reject(error));
    });
  }

  submit(connection: unknown): void {
    (connection as { query(text: string): void }).query('COMMIT');
  }

  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyInResponse(): void {}
  handleCopyData(): void {}
  handleError(error: Error): void {
    this.settle(error);
  }
  handleReadyForQuery(): void {
    this.settle();
  }
}

describe.each(FRAMEWORKS)('%s: a handler that committed the transaction itself', (framework) => {
  it.each([
    ['answers 201', 'answer'],
    ['throws', 'throw'],
    ['answers 503', 'rollback'],
  ] as const)('then %s: the answer is stored after the fact and replayed', async (_n, after) => {
    const db = fixture.db();
    const idempotency = fixture.track(
      createIdempotency({ pool: db.pool, scope: 'public', schema: db.schema }),
    );
    const app = fixture.track(
      await startApp({
        framework,
        idempotency,
        run: async (ctx) => {
          await ctx.tx.query('INSERT INTO orders (key) VALUES ($1)', [ctx.key]);
          await ctx.tx.query(new RawCommit()).done;
          if (after === 'throw') throw new Error('failed after its own COMMIT');
          return { status: after === 'answer' ? 201 : 503, body: { order: ctx.key } };
        },
      }),
    );
    const key = randomUUID();
    const first = await post(`${app.url}/run`, key, {});
    const retry = await post(`${app.url}/run`, key, {});
    const { rows } = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM orders WHERE key = $1',
      [key],
    );
    // What the handler committed stays: once, whatever it did next.
    expect(rows[0]?.n).toBe(1);
    if (after === 'answer') {
      expect(first.status).toBe(201);
      expect(JSON.parse(first.body)).toEqual({ order: key });
    } else {
      expect(first.status).toBe(500);
      expect(JSON.parse(first.body)).toMatchObject({
        type: 'urn:effectively-once:problem:failed-after-own-commit',
        code: 'EO_TX_CONTROL',
      });
    }
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    // The retry finds the row complete: the same answer, replayed, nothing run again.
    expect(retry).toMatchObject({ status: first.status, body: first.body });
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(idempotency.stats()).toMatchObject({ executed: 1, replayed: 1 });
  });
});
