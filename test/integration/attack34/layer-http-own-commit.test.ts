/**
 * The request side on a data layer, with a handler that commits the claim's transaction
 * itself (raw `COMMIT` through the layer's transaction object, as `trx.commit()` in
 * Knex would) and answers 201. The engine means to store the answer afterwards
 * (completeAfterCommit), but on a layer the transaction object was already handed
 * back: the key row stays committed without an answer, for every retry.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createIdempotency, REPLAYED_HEADER } from '../../../src/http/index.js';
import { createLayerDatabase, type LayerDatabase } from '../http/layer-support.js';
import { pgCallbackLayer } from '../data-layers/pg-layer.fixture.js';

describe('attack34: a handler that commits the layer transaction itself (HTTP)', () => {
  let db: LayerDatabase;
  let layerPool: pg.Pool;

  beforeAll(async () => {
    db = await createLayerDatabase('attack34_own_commit');
    layerPool = new pg.Pool({ connectionString: db.url, max: 4 });
    layerPool.on('error', () => undefined);
  });
  afterAll(async () => {
    await layerPool?.end();
    await db?.drop();
  });

  it('stores the answer it gave, so a retry replays it', async () => {
    const idempotency = createIdempotency<pg.PoolClient>({
      pool: db.pool,
      dataLayer: pgCallbackLayer(layerPool),
      scope: 'attack34',
    });
    try {
      let runs = 0;
      const handler = idempotency.handler(async (_request, ctx) => {
        runs++;
        await ctx.tx.query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, 1)', [
          ctx.key,
          'http',
        ]);
        await ctx.tx.query('COMMIT');
        return Response.json({ id: ctx.key }, { status: 201 });
      });
      const key = randomUUID();
      const request = (): Request =>
        new Request('http://local/orders', {
          method: 'POST',
          headers: { 'idempotency-key': key, 'content-type': 'application/json' },
          body: JSON.stringify({ key }),
        });

      const first = await handler(request());
      expect(first.status).toBe(201);
      const { rows: effects } = await db.pool.query('SELECT 1 FROM layer_effects WHERE id = $1', [
        key,
      ]);
      expect(effects).toHaveLength(1);

      // The key is taken by a committed execution: its retry gets that execution's answer.
      const retry = await handler(request());
      expect(runs).toBe(1);
      expect(retry.status).toBe(201);
      expect(retry.headers.get(REPLAYED_HEADER)).toBe('true');
      const { rows } = await db.pool.query<{ status: number | null }>(
        'SELECT status FROM eo_idempotency_keys WHERE idempotency_key = $1',
        [key],
      );
      expect(rows[0]?.status).toBe(201);
    } finally {
      await idempotency.close({ timeoutMs: 2000 });
    }
  });
});
