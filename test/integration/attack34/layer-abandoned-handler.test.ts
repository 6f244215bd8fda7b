/**
 * A handler given up on (handlerTimeoutMs) while it runs on a data layer's `ctx.tx`: the
 * library rolls the layer's transaction back and retries the delivery, but nothing stops
 * the abandoned handler from writing through the same `tx` afterwards. On a layer whose
 * transaction object is the connection it ran on (the reference pg-callback layer, and
 * drizzle over node-postgres, whose `tx` keeps the released PoolClient) that write runs
 * in autocommit, outside any claim: the redelivery applies the effect a second time.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer, HandlerTimeoutError } from '../../../src/index.js';
import type { Consumer } from '../../../src/consumer/types.js';
import type { DataLayer } from '../../../src/data-layer.js';
import { ManualSource } from '../../helpers/manual-source.js';
import { createLayerDatabase, type LayerDatabase } from '../data-layers/matrix-consumer.js';
import { pgCallbackLayer } from '../data-layers/pg-layer.fixture.js';

interface Message {
  amount: number;
}

function deferred<T = undefined>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

describe('attack34: a timed-out handler on a data layer', () => {
  let db: LayerDatabase;
  let layerPool: pg.Pool;
  const running: Consumer[] = [];

  beforeAll(async () => {
    db = await createLayerDatabase('attack34_abandoned');
    layerPool = new pg.Pool({ connectionString: db.url, max: 2 });
    layerPool.on('error', () => undefined);
  });
  afterAll(async () => {
    await Promise.all(running.map((c) => c.stop({ timeoutMs: 5000 })));
    await layerPool?.end();
    await db?.close();
  });

  it('never applies the effect outside the claim: the redelivery applies it once in all', async () => {
    const inner = pgCallbackLayer(layerPool);
    // The reference layer, with a hook telling the test when a transaction has ended.
    const ended: Array<ReturnType<typeof deferred>> = [deferred(), deferred()];
    let opened = 0;
    const layer: DataLayer<pg.PoolClient> = {
      ...inner,
      transaction: (settings, body) => {
        const done = ended[opened++]!;
        return inner.transaction(settings, body).finally(() => done.resolve(undefined));
      },
    };

    // Attempt 1 waits on something outside the database past its timeout (it does not
    // read ctx.signal, as a handler awaiting a slow API call without it), then writes.
    const gate = deferred();
    const lateWrite = deferred<unknown>();
    const source = new ManualSource<Message>();
    const consumer = createConsumer<Message, pg.PoolClient>({
      name: 'abandoned',
      source,
      pool: db.pool,
      dataLayer: layer,
      concurrency: 1,
      maxAttempts: 5,
      handlerTimeoutMs: 300,
      handler: async (m, ctx) => {
        if (ctx.attempt === 1) {
          await gate.promise;
          try {
            await ctx.tx.query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3)', [
              `${ctx.key}-attempt-1`,
              'consumer',
              m.amount,
            ]);
            lateWrite.resolve('written');
          } catch (error) {
            lateWrite.resolve(error);
          }
          return;
        }
        await ctx.tx.query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3)', [
          `${ctx.key}-attempt-${ctx.attempt}`,
          'consumer',
          m.amount,
        ]);
      },
    });
    running.push(consumer);
    await consumer.start();

    const first = await source.push({ key: 'k1', body: { amount: 1 }, attempt: 1 });
    expect(first.calls).toEqual(['retry']);
    expect(first.retryReason).toBeInstanceOf(HandlerTimeoutError);
    // The library rolled the layer's transaction back: the layer is done with it.
    await ended[0]!.promise;

    // The abandoned handler goes on, as the docs say it may ("a handler that ignores its
    // signal ... never commits").
    gate.resolve(undefined);
    await lateWrite.promise;

    const second = await source.push({ key: 'k1', body: { amount: 1 }, attempt: 2 });
    expect(second.calls).toEqual(['ack']);
    await ended[1]!.promise;

    const { rows } = await db.pool.query<{ id: string }>(
      "SELECT id FROM layer_effects WHERE id LIKE 'k1-%' ORDER BY id",
    );
    // One message, one effect: the abandoned attempt's write must not have committed.
    expect(rows.map((r) => r.id)).toEqual(['k1-attempt-2']);
  });
});
