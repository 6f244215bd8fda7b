/**
 * The request side on a layer whose handler can commit the claim's transaction itself
 * (TypeORM's `queryRunner.commitTransaction()`, Knex's `trx.commit()`), and then runs
 * past `handlerTimeoutMs` (a slow downstream call). The engine checks whether the claim
 * committed outside only for a handler that threw or answered a rollback status, not
 * for one that timed out: the request is answered as a timeout, as if nothing was
 * kept, while the effect and the key's claim are committed with no answer stored.
 * Drizzle over postgres.js lets a raw `COMMIT` through (a documented limit): there the
 * commit is sent, and only the check on the pool can say it happened.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Knex } from 'knex';
import { sql } from 'drizzle-orm';
import type { EntityManager } from 'typeorm';
import { createIdempotency } from '../../../src/http/index.js';
import {
  drizzlePostgresJsFixture,
  type DrizzlePostgresJsTx,
} from '../data-layers/drizzle-postgres-js.fixture.js';
import type { LayerFixture, OpenedLayer } from '../data-layers/fixture.js';
import { knexFixture } from '../data-layers/knex.fixture.js';
import { typeormFixture } from '../data-layers/typeorm.fixture.js';
import { createLayerDatabase, effects, type LayerDatabase } from './support.js';

function ownCommitThenSlow<Tx>(
  fixture: LayerFixture<Tx>,
  commit: (tx: Tx) => Promise<unknown>,
): void {
  describe(`on ${fixture.name}`, () => {
    let db: LayerDatabase;
    let opened: OpenedLayer<Tx>;

    beforeAll(async () => {
      db = await createLayerDatabase(`attack34b_http_timeout_${fixture.name}`);
      opened = await fixture.open(db.url);
    });
    afterAll(async () => {
      await opened?.close();
      await db?.close();
    });

    it('a committed effect is never answered as not applied, and its retry replays', async () => {
      const idempotency = createIdempotency<Tx>({
        pool: db.pool,
        dataLayer: opened.layer,
        scope: 'timeout',
        handlerTimeoutMs: 300,
      });
      let release!: () => void;
      const downstream = new Promise<void>((resolve) => (release = resolve));
      try {
        let runs = 0;
        const refusals: unknown[] = [];
        const handler = idempotency.handler(async (_request, ctx) => {
          runs++;
          await opened.insertEffect(ctx.tx, { id: ctx.key, door: 'http', amount: 1 });
          await commit(ctx.tx).catch((error: unknown) => {
            refusals.push(error);
            throw error;
          });
          // A slow downstream call, longer than handlerTimeoutMs.
          await downstream;
          return Response.json({ id: ctx.key }, { status: 201 });
        });
        const key = randomUUID();
        const request = (): Request =>
          new Request('http://local/charges', {
            method: 'POST',
            headers: { 'idempotency-key': key, 'content-type': 'application/json' },
            body: JSON.stringify({ amount: 1 }),
          });
        const first = await handler(request());
        release();
        const applied = (await effects(db, key)).length;
        const retry = await handler(request());
        // Applied (the handler's commit went through): never answered as not applied, and
        // the retry replays. Not applied: the commit was refused (EO_TX_CONTROL) before it
        // was sent, nothing of either run is kept, and the retry ran afresh.
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
                first: expect.not.stringMatching(/not applied|Nothing was applied/i),
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
        release();
        await idempotency.close({ timeoutMs: 2000 });
      }
    });
  });
}

describe('attack34b: the handler commits itself, then times out (HTTP)', () => {
  ownCommitThenSlow<EntityManager>(typeormFixture, (tx) => tx.queryRunner!.commitTransaction());
  ownCommitThenSlow<Knex.Transaction>(knexFixture, (tx) => tx.commit());
  ownCommitThenSlow<DrizzlePostgresJsTx>(drizzlePostgresJsFixture, (tx) =>
    tx.execute(sql.raw('COMMIT')),
  );
});
