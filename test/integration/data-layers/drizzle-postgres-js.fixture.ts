import { drizzle, type PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import postgres from 'postgres';
import { drizzleLayer } from '../../../adapters/drizzle/index.js';
import { layerEffects } from './drizzle-schema.js';
import type { LayerFixture } from './fixture.js';

// Drizzle over postgres.js as its docs show it: `drizzle({ client: postgres(url) })`, the
// effect `tx.insert(table).values(…)`, rolled back with `tx.rollback()`.

/** The transaction `db.transaction(async (tx) => …)` hands over. */
export type DrizzlePostgresJsTx = Parameters<Parameters<PostgresJsDatabase['transaction']>[0]>[0];

export const drizzlePostgresJsFixture: LayerFixture<DrizzlePostgresJsTx> = {
  name: 'drizzle-postgres-js',
  async open(databaseUrl) {
    const client = postgres(databaseUrl, { max: 10, onnotice: () => undefined });
    const db = drizzle({ client });
    return {
      layer: drizzleLayer(db),
      async insertEffect(tx, effect) {
        await tx.insert(layerEffects).values(effect);
      },
      // Throws Drizzle's TransactionRollbackError, which rolls the transaction back.
      layerRollback: async (tx) => tx.rollback(),
      close: () => client.end({ timeout: 5 }),
    };
  },
};
