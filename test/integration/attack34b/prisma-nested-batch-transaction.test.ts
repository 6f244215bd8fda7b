/**
 * Prisma: the array form of `$transaction` called on the handler's `ctx.tx`
 * (`ctx.tx.$transaction([ctx.tx.model.create(…)])`, Prisma's sequential-operations
 * API). Prisma's transaction client keeps `$transaction` (its deny list is `$connect`,
 * `$disconnect`, `$on`, `$use`, `$extends`), so this type-checks, and
 * docs/data-layers.md says "A nested `tx.$transaction(…)` is a savepoint inside the
 * claim's transaction". The callback form is; the array form runs its queries in a
 * batch transaction of its own, on another connection, which commits at once: the
 * effect is committed outside the claim, kept when the handler then fails, and applied
 * again by the redelivery.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { OpenedLayer } from '../data-layers/fixture.js';
import { prismaFixture, type PrismaTx } from '../data-layers/prisma.fixture.js';
import { claimed, Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

describe('attack34b: Prisma, the array form of $transaction on ctx.tx', () => {
  let db: LayerDatabase;
  let opened: OpenedLayer<PrismaTx>;
  const consumers = new Consumers(() => db);

  beforeAll(async () => {
    db = await createLayerDatabase('attack34b_prisma_batch_tx');
    opened = await prismaFixture.open(db.url);
  });
  afterAll(async () => {
    await consumers.stop();
    await opened?.close();
    await db?.close();
  });

  it("writes in the claim's transaction: nothing kept when the handler then fails", async () => {
    const source = await consumers.start<PrismaTx>('batch-tx', opened.layer, async (m, ctx) => {
      await ctx.tx.$transaction([
        ctx.tx.layerEffect.create({
          data: { id: `${ctx.key}-${ctx.attempt}`, door: 'c', amount: m.amount },
        }),
      ]);
      // A downstream call fails on the first attempt: the effect must roll back with the claim.
      if (ctx.attempt === 1) throw new Error('downstream failed');
    });

    const first = await source.push({ key: 'k', body: { amount: 1 }, attempt: 1 });
    expect(first.calls).toEqual(['retry']);
    expect({
      claimed: await claimed(db, 'batch-tx', 'k'),
      effects: await effects(db, 'k-'),
    }).toEqual({ claimed: false, effects: [] });
  });

  it('keeps the callback form a savepoint inside the claim', async () => {
    const source = await consumers.start<PrismaTx>('nested-cb', opened.layer, async (m, ctx) => {
      await ctx.tx.$transaction(async (inner) => {
        await inner.layerEffect.create({
          data: { id: `${ctx.key}-${ctx.attempt}`, door: 'c', amount: m.amount },
        });
      });
      if (ctx.attempt === 1) throw new Error('downstream failed');
    });
    const first = await source.push({ key: 'n', body: { amount: 1 }, attempt: 1 });
    const afterFirst = await effects(db, 'n-');
    const second = await source.push({ key: 'n', body: { amount: 1 }, attempt: 2 });
    expect({
      first: first.calls,
      afterFirst,
      second: second.calls,
      end: await effects(db, 'n-'),
    }).toEqual({ first: ['retry'], afterFirst: [], second: ['ack'], end: ['n-2'] });
  });
});
