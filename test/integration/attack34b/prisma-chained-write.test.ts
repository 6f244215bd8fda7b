/**
 * Prisma: a handler that chains its second write on its first without awaiting the
 * chain (`create(order).then(() => create(line))`, then returns). Prisma refuses the
 * chained write once the library lets the interactive transaction commit ("Transaction
 * already closed"), and nothing tells the library: the order commits, the delivery is
 * acked, the line is never written. The reference pg door refuses such a write and then
 * does not commit ("the transaction must not commit without what it meant to write",
 * src/tx/claim-connection.ts); the other layers' queues let the same chain in before
 * COMMIT (checked by hand: Kysely, Knex, postgres.js, Drizzle over postgres.js, TypeORM).
 *
 * Prisma's interactive transaction gives the bridge no view of a query still to come,
 * so this is a documented limit (docs/data-layers.md, Prisma: "Await every query you
 * start on `ctx.tx`"). What is still guaranteed, and asserted here: nothing of the
 * handler commits without its claim, nothing is applied twice (the redelivery is a
 * duplicate), and a chained write that did not commit was rejected to the handler's code.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { OpenedLayer } from '../data-layers/fixture.js';
import { prismaFixture, type PrismaTx } from '../data-layers/prisma.fixture.js';
import { claimed, Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

describe('attack34b: Prisma, a chained write the handler did not await', () => {
  let db: LayerDatabase;
  let opened: OpenedLayer<PrismaTx>;
  const consumers = new Consumers(() => db);

  beforeAll(async () => {
    db = await createLayerDatabase('attack34b_prisma_chain');
    opened = await prismaFixture.open(db.url);
  });
  afterAll(async () => {
    await consumers.stop();
    await opened?.close();
    await db?.close();
  });

  it('commits nothing outside the claim and nothing twice; a lost write is rejected', async () => {
    let chain: Promise<unknown> | undefined;
    const source = await consumers.start<PrismaTx>('chained', opened.layer, async (m, ctx) => {
      chain = ctx.tx.layerEffect
        .create({ data: { id: `${ctx.key}-order`, door: 'c', amount: m.amount } })
        .then(() =>
          ctx.tx.layerEffect.create({ data: { id: `${ctx.key}-line`, door: 'c', amount: 0 } }),
        );
      chain.catch(() => undefined);
    });
    const first = await source.push({ key: 'k', body: { amount: 1 }, attempt: 1 });
    const chained = await chain!.then(
      () => 'written',
      () => 'rejected',
    );
    const claim = await claimed(db, 'chained', 'k');
    const committed = await effects(db, 'k-');
    // Acked only with the claim committed; without the claim, nothing of the handler.
    expect({ acked: first.calls.includes('ack'), claim }).toEqual({ acked: claim, claim });
    if (!claim) expect(committed).toEqual([]);
    // The chained write committed, or its caller was told it did not.
    expect(chained).toBe(committed.includes('k-line') ? 'written' : 'rejected');
    // A redelivery applies nothing again.
    if (claim) {
      const again = await source.push({ key: 'k', body: { amount: 1 }, attempt: 2 });
      expect({ acked: again.calls.includes('ack'), committed: await effects(db, 'k-') }).toEqual({
        acked: true,
        committed,
      });
    }
  });
});
