/**
 * Knex in batch mode: one message's handler calls `trx.commit()`. docs/data-layers.md
 * says what that means: "After `trx.commit()` the claim and the effect committed
 * together: the delivery counts as processed with an `EO_TX_CONTROL` error event". In a
 * batch, the claim statement claimed every key of the batch in the same transaction, so
 * that commit also commits the claims of the batch's other messages, whose handlers
 * have not written their effects yet (their writes are refused: the transaction is
 * complete). The batch fails, the redelivery finds those keys claimed: duplicates, acked,
 * their effects never applied.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Knex } from 'knex';
import type { OpenedLayer } from '../data-layers/fixture.js';
import { knexFixture } from '../data-layers/knex.fixture.js';
import { Consumers, createLayerDatabase, effects, type LayerDatabase } from './support.js';

describe("attack34b: Knex batch mode, one handler's trx.commit()", () => {
  let db: LayerDatabase;
  let opened: OpenedLayer<Knex.Transaction>;
  const consumers = new Consumers(() => db);

  beforeAll(async () => {
    db = await createLayerDatabase('attack34b_knex_batch');
    opened = await knexFixture.open(db.url);
  });
  afterAll(async () => {
    await consumers.stop();
    await opened?.close();
    await db?.close();
  });

  it('never acks a message of the batch whose effect was not written', async () => {
    const refusals: unknown[] = [];
    const source = await consumers.start<Knex.Transaction>(
      'batch-commit',
      opened.layer,
      async (m, ctx) => {
        await ctx
          .tx('layer_effects')
          .insert({ id: `${ctx.key}-order`, door: 'c', amount: m.amount });
        // The first message's handler commits what it wrote itself.
        if (ctx.key === 'a')
          await ctx.tx.commit().catch((error: unknown) => {
            refusals.push(error);
            throw error;
          });
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
