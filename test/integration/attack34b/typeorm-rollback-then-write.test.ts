/**
 * TypeORM's manual transaction control on the handler's `ctx.tx`: its query runner's
 * `rollbackTransaction()`, then a write through the same EntityManager, then the handler
 * returns. docs/data-layers.md says of it "queryRunner.commit/rollbackTransaction: xid
 * check fails, settled by xid", but the write after the rollback runs in autocommit on the
 * transaction's connection: committed with no claim, and again by every redelivery.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DataSource, EntityManager } from 'typeorm';
import { typeormLayer } from 'effectively-once/typeorm';
import { LayerEffectEntity, openDataSource } from '../data-layers/typeorm.fixture.js';
import { claimed, Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

describe('attack34b: TypeORM rollbackTransaction() in a handler, then a write', () => {
  let db: LayerDatabase;
  let dataSource: DataSource;
  const consumers = new Consumers(() => db);

  beforeAll(async () => {
    db = await createLayerDatabase('attack34b_typeorm_rb');
    dataSource = await openDataSource(db.url);
  });
  afterAll(async () => {
    await consumers.stop();
    await dataSource?.destroy();
    await db?.close();
  });

  it('never commits the write without the claim, never applies it twice', async () => {
    // Rolls its work back on a business rule and records the rejection through the same
    // EntityManager, then returns.
    const source = await consumers.start<EntityManager>(
      'own-rollback',
      typeormLayer(dataSource),
      async (m, ctx) => {
        const repository = ctx.tx.getRepository(LayerEffectEntity);
        await repository.insert({ id: `${ctx.key}-order`, door: 'consumer', amount: m.amount });
        await ctx.tx.queryRunner!.rollbackTransaction();
        await repository.insert({
          id: `${ctx.key}-rejected-${ctx.attempt}`,
          door: 'consumer',
          amount: 0,
        });
      },
    );

    const first = await source.push({ key: 'rb-1', body: { amount: 5 }, attempt: 1 });
    // What committed must match the claim: an effect with no claim beside it is outside
    // the claim, and the redelivery runs the handler again.
    const claim = await claimed(db, 'own-rollback', 'rb-1');
    expect({ claimed: claim, effects: await effects(db, 'rb-1') }).toEqual({
      claimed: claim,
      effects: claim ? ['rb-1-rejected-1'] : [],
    });
    expect(first.outcome).toBe(claim ? 'processed' : 'retry');

    await source.push({ key: 'rb-1', body: { amount: 5 }, attempt: 2 });
    // One message: its rejection recorded once at most.
    expect((await effects(db, 'rb-1')).length).toBeLessThanOrEqual(1);
  });
});
