/**
 * The request side on a data layer, with a handler given up on at handlerTimeoutMs that
 * goes on without reading ctx.signal: the door answers the request as failed and rolls
 * the layer's transaction back, but the handler's later write through ctx.tx runs on the
 * released connection in autocommit, and the retry applies the effect again.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createIdempotency } from '../../../src/http/index.js';
import { createLayerDatabase, type LayerDatabase } from '../http/layer-support.js';
import { pgCallbackLayer } from '../data-layers/pg-layer.fixture.js';
describe('attack34: a timed-out handler on a data layer (HTTP)', () => {
  let db: LayerDatabase;
  let layerPool: pg.Pool;

  beforeAll(async () => {
    db = await createLayerDatabase('attack34_http_timeout');
    layerPool = new pg.Pool({ connectionString: db.url, max: 4 });
    layerPool.on('error', () => undefined);
  });
  afterAll(async () => {
    await layerPool?.end();
    await db?.drop();
  });

  it('a request answered as failed applies nothing; its retry applies it once', async () => {
    const inner = pgCallbackLayer(layerPool);
    const ended: Array<() => void> = [];
    const endedOnce: Array<Promise<void>> = [];
    for (let i = 0; i < 2; i++) endedOnce.push(new Promise<void>((r) => ended.push(r)));
    let opened = 0;
    const idempotency = createIdempotency<pg.PoolClient>({
      pool: db.pool,
      dataLayer: {
        ...inner,
        transaction: (settings, body) => {
          const done = ended[opened++]!;
          return inner.transaction(settings, body).finally(done);
        },
      },
      scope: 'attack34-timeout',
      handlerTimeoutMs: 300,
    });
    try {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let lateWrite!: (outcome: unknown) => void;
      const written = new Promise<unknown>((r) => (lateWrite = r));
      let runs = 0;
      const handler = idempotency.handler(async (_request, ctx) => {
        const run = ++runs;
        if (run === 1) {
          // Waits on something outside the database past its timeout, without ctx.signal.
          await gate;
          try {
            await ctx.tx.query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, 1)', [
              `${ctx.key}-run-1`,
              'http',
            ]);
            lateWrite('written');
          } catch (error) {
            lateWrite(error);
          }
          return Response.json({ run }, { status: 201 });
        }
        await ctx.tx.query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, 1)', [
          `${ctx.key}-run-${run}`,
          'http',
        ]);
        return Response.json({ run }, { status: 201 });
      });
      const key = randomUUID();
      const request = (): Request =>
        new Request('http://local/orders', {
          method: 'POST',
          headers: { 'idempotency-key': key, 'content-type': 'application/json' },
          body: JSON.stringify({ key }),
        });

      const first = await handler(request());
      expect(first.status).toBeGreaterThanOrEqual(500);
      await endedOnce[0];
      release();
      await written;

      const retry = await handler(request());
      expect(retry.status).toBe(201);
      await endedOnce[1];
      const { rows } = await db.pool.query<{ id: string }>(
        'SELECT id FROM layer_effects WHERE id LIKE $1 ORDER BY id',
        [`${key}-%`],
      );
      // The first request was answered as failed: only the retry's effect may exist.
      expect(rows.map((r) => r.id)).toEqual([`${key}-run-2`]);
    } finally {
      await idempotency.close({ timeoutMs: 2000 });
    }
  });
});
