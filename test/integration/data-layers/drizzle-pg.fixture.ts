import { drizzle, type NodePgDatabase } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { drizzleLayer } from '../../../adapters/drizzle/index.js';
import { layerEffects } from './drizzle-schema.js';
import type { LayerFixture } from './fixture.js';

// Drizzle over node-postgres as its docs show it: `drizzle({ client: pool })`, the effect
// `tx.insert(table).values(…)`, rolled back with `tx.rollback()`.

/** The transaction `db.transaction(async (tx) => …)` hands over. */
export type DrizzlePgTx = Parameters<Parameters<NodePgDatabase['transaction']>[0]>[0];

export const drizzlePgFixture: LayerFixture<DrizzlePgTx> = {
  name: 'drizzle-pg',
  async open(databaseUrl) {
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
    pool.on('error', () => undefined);
    const db = drizzle({ client: pool });
    return {
      layer: drizzleLayer(db),
      async insertEffect(tx, effect) {
        await tx.insert(layerEffects).values(effect);
      },
      // Throws Drizzle's TransactionRollbackError, which rolls the transaction back.
      layerRollback: async (tx) => tx.rollback(),
      close: () => pool.end(),
    };
  },
};
