/**
 * Drizzle over node-postgres: a statement the handler started on `ctx.tx` but did not
 * await (sent once something else it waits on resolves). docs/data-layers.md says such a
 * statement "sent after COMMIT runs outside the claim (cannot undo it)". It is worse: the
 * Drizzle transaction keeps the PoolClient it ran on, which goes back to the pool after
 * COMMIT, so the late statement runs in whatever transaction holds that connection next,
 * here the next delivery's claim transaction. When that one rolls back, the first
 * delivery's effect is rolled back with it, though that delivery was acked.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { drizzleLayer } from 'effectively-once/drizzle';
import { layerEffects } from '../data-layers/drizzle-schema.js';
import { Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

type Tx = Parameters<Parameters<NodePgDatabase['transaction']>[0]>[0];

describe('attack34b: Drizzle over node-postgres, a statement left floating', () => {
  let db: LayerDatabase;
  let drizzlePool: pg.Pool;
  const consumers = new Consumers(() => db);

  beforeAll(async () => {
    db = await createLayerDatabase('attack34b_drizzle_float');
    // One connection, so the next transaction is on the one the first ran on.
    drizzlePool = new pg.Pool({ connectionString: db.url, max: 1 });
    drizzlePool.on('error', () => undefined);
  });
  afterAll(async () => {
    await consumers.stop();
    await drizzlePool?.end();
    await db?.close();
  });

  it("an acked delivery's late statement is never rolled back with another claim", async () => {
    let releaseLate!: () => void;
    const lateMaySend = new Promise<void>((resolve) => (releaseLate = resolve));
    let late: Promise<unknown> | undefined;

    const source = await consumers.start<Tx>(
      'floating',
      drizzleLayer(drizzle({ client: drizzlePool })),
      async (m, ctx) => {
        if (ctx.key === 'a') {
          await ctx.tx.insert(layerEffects).values({ id: 'a-order', door: 'c', amount: m.amount });
          // The receipt is written once an outside call answers; not awaited.
          late = lateMaySend.then(() =>
            ctx.tx.insert(layerEffects).values({ id: 'a-receipt', door: 'c', amount: 0 }),
          );
          late.catch(() => undefined);
          return;
        }
        // Delivery b: its transaction is on the connection a's ran on.
        await ctx.tx.insert(layerEffects).values({ id: 'b-order', door: 'c', amount: m.amount });
        releaseLate();
        await late!.catch(() => undefined);
        throw new Error('b fails: its transaction rolls back');
      },
    );

    const a = await source.push({ key: 'a', body: { amount: 1 }, attempt: 1 });
    expect(a.calls).toEqual(['ack']);
    const b = await source.push({ key: 'b', body: { amount: 2 }, attempt: 1 });
    expect(b.calls).toEqual(['retry']);

    // a was acked. Its late statement is either refused (never applied, and the handler
    // sees the refusal) or committed; never applied in b's transaction and rolled back
    // with it.
    const refused = await late!.then(
      () => false,
      () => true,
    );
    expect({ refused, effects: await effects(db, 'a-') }).toEqual({
      refused,
      effects: refused ? ['a-order'] : ['a-order', 'a-receipt'],
    });
  });
});
