import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import pg from 'pg';
import { kyselyLayer } from 'effectively-once/kysely';
import type { LayerFixture, OpenedLayer } from './fixture.js';

/** `layer_effects`, as Kysely's types see it. */
export interface EffectsDatabase {
  layer_effects: { id: string; door: string; amount: number };
}

/**
 * A pg pool for Kysely whose clients each have an `error` listener: node-postgres emits
 * a lost connection on a checked-out client, and Kysely listens on none (the tests kill
 * backends on purpose).
 */
export function kyselyPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('connect', (client) => client.on('error', () => undefined));
  pool.on('error', () => undefined);
  return pool;
}

/** Kysely over node-postgres, its effect written with Kysely's query builder. */
export const kyselyFixture: LayerFixture<Transaction<EffectsDatabase>> = {
  name: 'kysely',
  open(databaseUrl: string): Promise<OpenedLayer<Transaction<EffectsDatabase>>> {
    const db = new Kysely<EffectsDatabase>({
      dialect: new PostgresDialect({ pool: kyselyPool({ connectionString: databaseUrl }) }),
    });
    return Promise.resolve({
      layer: kyselyLayer(db),
      insertEffect: async (tx, effect) => {
        await tx.insertInto('layer_effects').values(effect).execute();
      },
      // A Kysely Transaction has no rollback() of its own (only a ControlledTransaction
      // has): a callback transaction rolls back when its callback throws.
      layerRollback: () => Promise.reject(new Error('kysely: the handler rolls back by throwing')),
      close: () => db.destroy(),
    });
  },
};
