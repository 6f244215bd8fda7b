/**
 * TypeORM in batch mode: one message's handler checkpoints with its query runner's
 * `commitTransaction()` (TypeORM's documented manual control, which docs/data-layers.md
 * does not warn against: "xid check fails, settled by xid"). The batch's claim statement
 * claimed every key of the batch in that transaction, so the checkpoint commits the
 * claims of the batch's other messages too, before their handlers ran. A later message
 * of the batch fails (its handler throws before writing): the batch is retried, finds
 * every key claimed, and acks them all as duplicates. The failed message is never applied.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { DataSource, EntityManager } from 'typeorm';
import { typeormLayer } from 'effectively-once/typeorm';
import { LayerEffectEntity, openDataSource } from '../data-layers/typeorm.fixture.js';
import { Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

describe("attack34b: TypeORM batch mode, one handler's commitTransaction()", () => {
  let db: LayerDatabase;
  let dataSource: DataSource;
  const consumers = new Consumers(() => db);

  beforeAll(async () => {
    db = await createLayerDatabase('attack34b_typeorm_batch');
    dataSource = await openDataSource(db.url);
  });
  afterAll(async () => {
    await consumers.stop();
    await dataSource?.destroy();
    await db?.close();
  });

  it('never acks a message of the batch whose effect was not written', async () => {
    const refusals: unknown[] = [];
    let bFails = true;
    const source = await consumers.start<EntityManager>(
      'batch-commit',
      typeormLayer(dataSource),
      async (m, ctx) => {
        // b's downstream call fails once, before b writes anything.
        if (ctx.key === 'b' && bFails) {
          bFails = false;
          throw new Error('downstream failed');
        }
        await ctx.tx
          .getRepository(LayerEffectEntity)
          .insert({ id: `${ctx.key}-order`, door: 'c', amount: m.amount });
        // a checkpoints what it wrote.
        if (ctx.key === 'a') {
          await ctx.tx.queryRunner!.commitTransaction().catch((error: unknown) => {
            refusals.push(error);
            throw error;
          });
          await ctx.tx.queryRunner!.startTransaction();
        }
      },
      { batch: { maxSize: 2, maxWaitMs: 1000 } },
    );

    const pending = new Map<string, number>([
      ['a', 1],
      ['b', 1],
    ]);
    // Deliver until every message is acked (a redelivery per round for what was not).
    for (let round = 0; round < 4 && pending.size > 0; round++) {
      const results = await Promise.all(
        [...pending].map(([key, attempt]) => source.push({ key, body: { amount: 1 }, attempt })),
      );
      for (const result of results) {
        const key = result.delivery.key!;
        if (result.calls.includes('ack')) pending.delete(key);
        else pending.set(key, pending.get(key)! + 1);
      }
    }
    // An acked message's effect must be there; one not acked left nothing behind. b's
    // handler does nothing unusual: it is acked. a's own commit is refused (EO_TX_CONTROL)
    // before anything is sent, so a is acked only if it committed with its effect.
    const acked = ['a', 'b'].filter((key) => !pending.has(key));
    expect({ acked: acked.includes('b'), effects: await effects(db, '') }).toEqual({
      acked: true,
      effects: acked.map((key) => `${key}-order`),
    });
    if (pending.has('a')) {
      expect(refusals.length).toBeGreaterThan(0);
      expect(new Set(refusals.map((e) => (e as { code?: unknown }).code))).toEqual(
        new Set(['EO_TX_CONTROL']),
      );
    }
  });
});
