/**
 * `ROLLBACK` sent through the layer's own raw-SQL call on `ctx.tx` (Prisma's
 * `$executeRawUnsafe`, Drizzle's `execute(sql…)`, TypeORM's `query`, a postgres.js
 * tagged template), then the effect through `ctx.tx`, and the handler returns. The pg
 * door refuses a statement that ends the transaction (src/tx/guard.ts: "in `SELECT 1;
 * ROLLBACK` the claim's transaction would end, and the handler's later writes would run
 * in autocommit, applied again by the retry"), and so do the Knex and Kysely bridges;
 * these four send it. The effect then commits in autocommit with no claim, the delivery
 * is retried, and the redelivery applies it again.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { sql as drizzleSql } from 'drizzle-orm';
import type { LayerFixture, OpenedLayer } from '../data-layers/fixture.js';
import { drizzlePgFixture, type DrizzlePgTx } from '../data-layers/drizzle-pg.fixture.js';
import { postgresJsFixture } from '../data-layers/postgres-js.fixture.js';
import { prismaFixture, type PrismaTx } from '../data-layers/prisma.fixture.js';
import { typeormFixture } from '../data-layers/typeorm.fixture.js';
import type { TransactionSql } from 'postgres';
import type { EntityManager } from 'typeorm';
import { claimed, Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

function rawRollback<Tx>(fixture: LayerFixture<Tx>, rollback: (tx: Tx) => Promise<unknown>): void {
  describe(`on ${fixture.name}`, () => {
    let db: LayerDatabase;
    let opened: OpenedLayer<Tx>;
    const consumers = new Consumers(() => db);

    beforeAll(async () => {
      db = await createLayerDatabase(`attack34b_rawrb_${fixture.name}`);
      opened = await fixture.open(db.url);
    });
    afterAll(async () => {
      await consumers.stop();
      await opened?.close();
      await db?.close();
    });

    it('is refused, or nothing of the handler commits without the claim', async () => {
      const source = await consumers.start<Tx>('raw-rollback', opened.layer, async (m, ctx) => {
        await rollback(ctx.tx);
        await opened.insertEffect(ctx.tx, {
          id: `${ctx.key}-${ctx.attempt}`,
          door: 'c',
          amount: m.amount,
        });
      });
      await source.push({ key: 'k', body: { amount: 1 }, attempt: 1 });
      const claim = await claimed(db, 'raw-rollback', 'k');
      expect({ claim, committed: await effects(db, 'k-') }).toEqual({
        claim,
        committed: claim ? ['k-1'] : [],
      });
    });
  });
}

describe('attack34b: ROLLBACK through the layer, then the effect', () => {
  rawRollback<PrismaTx>(prismaFixture, (tx) => tx.$executeRawUnsafe('ROLLBACK'));
  rawRollback<DrizzlePgTx>(drizzlePgFixture, (tx) => tx.execute(drizzleSql`ROLLBACK`));
  rawRollback<EntityManager>(typeormFixture, (tx) => tx.query('ROLLBACK'));
  rawRollback<TransactionSql>(postgresJsFixture, (tx) => tx`ROLLBACK`);
});
