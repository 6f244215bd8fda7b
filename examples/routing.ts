/**
 * One consumer, three regional databases: each order is claimed, applied and its
 * outbox rows written in the database of its region. The route must give a key the
 * same database every time (docs/routing.md): here the region is part of the key.
 * test/integration/routing/ runs the same shape on three local clusters.
 */
import pg from 'pg';
import { createConsumer, type Consumer, type Source } from 'effectively-once';

/** The message body; its key is `<region>:<order id>`, e.g. `eu:4711`. */
export interface PlaceOrder {
  orderId: string;
  amountCents: number;
}

const REGIONS = ['eu', 'us', 'apac'] as const;

/** The region a key names: fixed for the key's lifetime, so its database is too. */
export function regionOf(key: string): (typeof REGIONS)[number] {
  const region = key.slice(0, key.indexOf(':'));
  const known = REGIONS.find((r) => r === region);
  if (known === undefined) throw new Error(`no region in key ${key}`);
  return known;
}

// #region routing
/** The consumer: `pool` is a routing, each delivery claimed in its region's database. */
export function orders(
  pools: { eu: pg.Pool; us: pg.Pool; apac: pg.Pool },
  source: Source<PlaceOrder>,
): Consumer {
  return createConsumer<PlaceOrder>({
    name: 'orders',
    pool: {
      databases: pools,
      route: ({ key }) => regionOf(key), // the same answer for a key, always
    },
    source,
    handler: async (order, ctx) => {
      // ctx.tx is a client of the key's own database: the effect commits with its claim.
      await ctx.tx.query('INSERT INTO orders (id, amount_cents) VALUES ($1, $2)', [
        order.orderId,
        order.amountCents,
      ]);
    },
  });
}
// #endregion
