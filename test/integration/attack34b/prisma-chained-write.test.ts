/**
 * Prisma: a handler that chains its second write on its first without awaiting the
 * chain (`create(order).then(() => create(line))`, then returns). Prisma refuses the
 * chained write once the library lets the interactive transaction commit ("Transaction
 * already closed"), and nothing tells the library: the order commits, the delivery is
 * acked, the line is never written. The reference pg door refuses such a write and then
 * does not commit ("the transaction must not commit without what it meant to write",
 * src/tx/claim-connection.ts); the other layers' queues let the same chain in before
 * COMMIT (checked by hand: Kysely, Knex, postgres.js, Drizzle over postgres.js, TypeORM).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { OpenedLayer } from '../data-layers/fixture.js';
import { prismaFixture, type PrismaTx } from '../data-layers/prisma.fixture.js';
import { Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

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

  it('never acks with the chained write refused', async () => {
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
    await chain!.catch(() => undefined);
    // Acked: the message is gone, all it wrote must be there; not acked: none of it.
    expect({ calls: first.calls, committed: await effects(db, 'k-') }).toEqual({
      calls: first.calls,
      committed: first.calls.includes('ack') ? ['k-line', 'k-order'] : [],
    });
  });
});
