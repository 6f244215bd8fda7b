/**
 * The data-layer examples of docs/data-layers.md (examples/data-layers/), each run against
 * the test Postgres: its consumer handles an order delivered twice under one key, its
 * endpoint answers a charge sent twice under one Idempotency-Key, and each effect (and the
 * consumer's outbox row) is there once, written through the layer's own transaction.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from '@jest/globals';
import { idempotentFetch } from 'effectively-once/client';
import { memorySource } from 'effectively-once/testing';
import * as kysely from '../../../examples/data-layers/kysely.js';
import * as typeorm from '../../../examples/data-layers/typeorm.js';
import type { OrderPlaced } from '../../../examples/data-layers/run.js';
import { waitFor } from '../../helpers/wait-for.js';
import { createExampleDatabase, type ExampleDatabase } from './support.js';

const running: Array<{ stop: () => Promise<void>; db: ExampleDatabase }> = [];
afterEach(async () => {
  for (const r of running.splice(0)) {
    await r.stop();
    await r.db.drop();
  }
});

describe.each([
  ['examples/data-layers/typeorm.ts', typeorm.main],
  ['examples/data-layers/kysely.ts', kysely.main],
] as const)('%s', (_name, main) => {
  it('applies an order and a charge once each, with the order’s outbox row', async () => {
    const db = await createExampleDatabase('layers');
    const source = memorySource<OrderPlaced>();
    const abort = new AbortController();
    let url = '';
    let listening: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => (listening = resolve));
    const done = main({
      signal: abort.signal,
      env: { DATABASE_URL: db.url, PORT: '0' },
      source,
      onListening: (at) => {
        url = at;
        listening();
      },
    });
    running.push({
      db,
      stop: async () => {
        abort.abort();
        await done;
      },
    });
    await Promise.race([ready, done]);

    // The consumer: the same order delivered twice (a producer's resend).
    const order = { orderId: randomUUID(), totalCents: 1999 };
    source.send(order, { key: order.orderId });
    source.send(order, { key: order.orderId });
    await waitFor(() => source.outstanding === 0);

    // The endpoint: the same charge sent twice under one key; the second is a replay.
    const key = randomUUID();
    const call = () =>
      idempotentFetch(`${url}/charges`, { method: 'POST' }, { key, json: { amountCents: 500 } });
    const first = await call();
    const again = await call();
    expect(first.response.status).toBe(201);
    expect(again.replayed).toBe(true);
    expect(await again.response.json()).toEqual(await first.response.json());

    const { rows } = await db.pool.query<{ id: string; door: string; amount: number }>(
      'SELECT id, door, amount FROM layer_effects ORDER BY door',
    );
    expect(rows).toEqual([
      { id: `order-${order.orderId}`, door: 'consumer', amount: 1999 },
      { id: `charge-${key}`, door: 'http', amount: 500 },
    ]);
    const outbox = await db.pool.query<{ destination: string }>(
      'SELECT destination FROM eo_outbox',
    );
    expect(outbox.rows).toEqual([{ destination: 'receipts' }]);
  });
});
