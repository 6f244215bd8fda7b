/**
 * The request side on Knex: a handler that calls `trx.commit()` (its effect and the key's
 * claim commit) and then answers with a 5xx, or throws. The engine asks the layer's
 * transaction whether the claim committed outside (`committedOutside`), but on Knex the
 * bridge refuses every statement after the handler's commit, so the answer is "no": the
 * engine "rolls back" (nothing left to roll back) and answers as if nothing was kept.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Knex } from 'knex';
import { createIdempotency } from '../../../src/http/index.js';
import type { OpenedLayer } from '../data-layers/fixture.js';
import { knexFixture } from '../data-layers/knex.fixture.js';
import { createLayerDatabase, effects, type LayerDatabase } from './support.js';

describe("attack34b: Knex on the request side, the handler's trx.commit() then a failure", () => {
  let db: LayerDatabase;
  let opened: OpenedLayer<Knex.Transaction>;

  beforeAll(async () => {
    db = await createLayerDatabase('attack34b_knex_http');
    opened = await knexFixture.open(db.url);
  });
  afterAll(async () => {
    await opened?.close();
    await db?.close();
  });

  const request = (key: string): Request =>
    new Request('http://local/charges', {
      method: 'POST',
      headers: { 'idempotency-key': key, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: 1 }),
    });

  it.each(['answers 503', 'throws'])(
    'after trx.commit(), a handler that %s: the answer and its retry say what committed',
    async (how) => {
      const idempotency = createIdempotency<Knex.Transaction>({
        pool: db.pool,
        dataLayer: opened.layer,
        scope: `knex-${how.replace(/\W/g, '')}`,
      });
      try {
        let runs = 0;
        const refusals: unknown[] = [];
        const handler = idempotency.handler(async (_request, ctx) => {
          runs++;
          await ctx.tx('layer_effects').insert({ id: ctx.key, door: 'http', amount: 1 });
          await ctx.tx.commit().catch((error: unknown) => {
            refusals.push(error);
            throw error;
          });
          if (how === 'throws') throw new Error('the downstream call failed');
          return Response.json({ error: 'downstream failed' }, { status: 503 });
        });
        const key = randomUUID();
        const first = await handler(request(key));
        const applied = (await effects(db, key)).length;
        const retry = await handler(request(key));
        // The effect is applied, with its claim: the first answer must not say that
        // nothing was applied, and the retry gets the first answer again (a replay),
        // never a run of its own nor an error for the key's whole lifetime.
        // Not applied (trx.commit() refused with EO_TX_CONTROL before it was sent): nothing
        // of either run is kept, and the retry ran afresh instead of an error for the key.
        expect({
          applied,
          runs,
          first: await first.text(),
          retry: retry.status,
          replayed: retry.headers.get('idempotent-replayed'),
          after: (await effects(db, key)).length,
          refused: refusals.map((e) => (e as { code?: unknown }).code),
        }).toEqual(
          applied === 1
            ? {
                applied: 1,
                runs: 1,
                first: expect.not.stringMatching(/Nothing was applied/),
                retry: first.status,
                replayed: 'true',
                after: 1,
                refused: [],
              }
            : {
                applied: 0,
                runs: 2,
                first: expect.stringContaining('EO_HANDLER'),
                retry: first.status,
                replayed: null,
                after: 0,
                refused: ['EO_TX_CONTROL', 'EO_TX_CONTROL'],
              },
        );
      } finally {
        await idempotency.close({ timeoutMs: 2000 });
      }
    },
  );
});
