/**
 * TypeORM's manual transaction control on the handler's `ctx.tx`: its query runner's
 * `commitTransaction()` (a checkpoint), then `startTransaction()` and the effect on the
 * same EntityManager. The library's xid check finds another transaction, reads the claim
 * back as committed and acks, with a warning that what ran after "ran outside it"; but
 * it first lets TypeORM roll back the transaction that is open, the one holding the
 * effect. The delivery is acked and its effect is gone.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DataSource, EntityManager } from 'typeorm';
import { typeormLayer } from 'effectively-once/typeorm';
import { LayerEffectEntity, openDataSource } from '../data-layers/typeorm.fixture.js';
import { Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

describe('attack34b: TypeORM commitTransaction() + startTransaction() in a handler', () => {
  let db: LayerDatabase;
  let dataSource: DataSource;
  const consumers = new Consumers(() => db);

  beforeAll(async () => {
    db = await createLayerDatabase('attack34b_typeorm_ck');
    dataSource = await openDataSource(db.url);
  });
  afterAll(async () => {
    await consumers.stop();
    await dataSource?.destroy();
    await db?.close();
  });

  it('never acks the delivery with its effect lost', async () => {
    const source = await consumers.start<EntityManager>(
      'own-commit',
      typeormLayer(dataSource),
      async (m, ctx) => {
        const runner = ctx.tx.queryRunner!;
        await runner.commitTransaction();
        await runner.startTransaction();
        await ctx.tx
          .getRepository(LayerEffectEntity)
          .insert({ id: `${ctx.key}-order`, door: 'consumer', amount: m.amount });
      },
    );

    const first = await source.push({ key: 'ck-1', body: { amount: 7 }, attempt: 1 });
    if (!first.calls.includes('ack'))
      await source.push({ key: 'ck-1', body: { amount: 7 }, attempt: 2 });
    // Acked (now or on the redelivery): the message is gone, so its effect must be there.
    expect(await effects(db, 'ck-1')).toEqual(['ck-1-order']);
  });
});
