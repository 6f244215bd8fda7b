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
    const refusals: unknown[] = [];
    const source = await consumers.start<EntityManager>(
      'own-commit',
      typeormLayer(dataSource),
      async (m, ctx) => {
        const runner = ctx.tx.queryRunner!;
        await runner.commitTransaction().catch((error: unknown) => {
          refusals.push(error);
          throw error;
        });
        await runner.startTransaction();
        await ctx.tx
          .getRepository(LayerEffectEntity)
          .insert({ id: `${ctx.key}-order`, door: 'consumer', amount: m.amount });
      },
    );

    const first = await source.push({ key: 'ck-1', body: { amount: 7 }, attempt: 1 });
    const second = first.calls.includes('ack')
      ? first
      : await source.push({ key: 'ck-1', body: { amount: 7 }, attempt: 2 });
    const acked = second.calls.includes('ack');
    // Acked (now or on the redelivery): the message is gone, so its effect must be there.
    // Not acked: the handler's own COMMIT was refused, and nothing of it committed.
    expect({ acked, effects: await effects(db, 'ck-1') }).toEqual({
      acked,
      effects: acked ? ['ck-1-order'] : [],
    });
    if (!acked)
      expect(refusals.map((e) => (e as { code?: unknown }).code)).toEqual([
        'EO_TX_CONTROL',
        'EO_TX_CONTROL',
      ]);
  });
});
