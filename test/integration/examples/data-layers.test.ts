/**
 * The data-layer examples of docs/data-layers.md (examples/data-layers/), each run against
 * the test Postgres: its consumer handles an order delivered twice under one key, its
 * endpoint answers a charge sent twice under one Idempotency-Key, and each effect (and the
 * consumer's outbox row) is there once, committed by the transaction that committed its
 * claim (one xmin): written through the layer's own transaction.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from '@jest/globals';
import { idempotentFetch } from 'effectively-once/client';
import { memorySource } from 'effectively-once/testing';
import * as drizzle from '../../../examples/data-layers/drizzle.js';
import * as knex from '../../../examples/data-layers/knex.js';
import * as kysely from '../../../examples/data-layers/kysely.js';
import * as postgresJs from '../../../examples/data-layers/postgres-js.js';
import * as prisma from '../../../examples/data-layers/prisma.js';
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
  ['examples/data-layers/prisma.ts', prisma.main],
  ['examples/data-layers/drizzle.ts', drizzle.main],
  ['examples/data-layers/knex.ts', knex.main],
  ['examples/data-layers/typeorm.ts', typeorm.main],
  ['examples/data-layers/kysely.ts', kysely.main],
  ['examples/data-layers/postgres-js.ts', postgresJs.main],
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

    // Each claim committed in the transaction that wrote its effect (one xmin): the
    // order's claim with its effect and outbox row, the charge's key row with its effect.
    const together = await db.pool.query<{ order: string; charge: string }>(
      `SELECT
         (SELECT count(DISTINCT x)::text FROM (
            SELECT xmin::text AS x FROM layer_effects WHERE id = $1
            UNION ALL SELECT xmin::text FROM processed_messages WHERE message_key = $2
            UNION ALL SELECT xmin::text FROM eo_outbox) t) AS order,
         (SELECT count(DISTINCT x)::text FROM (
            SELECT xmin::text AS x FROM layer_effects WHERE id = $3
            UNION ALL SELECT xmin::text FROM eo_idempotency_keys WHERE idempotency_key = $4) t)
           AS charge`,
      [`order-${order.orderId}`, order.orderId, `charge-${key}`, key],
    );
    expect(together.rows).toEqual([{ order: '1', charge: '1' }]);
  });
});
