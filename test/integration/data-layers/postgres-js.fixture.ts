import postgres, { type TransactionSql } from 'postgres';
import { postgresLayer } from '../../../adapters/postgres-js/index.js';
import type { LayerFixture } from './fixture.js';

// postgres.js as its README shows it: one `postgres(url)` instance for the app, the
// effect a tagged template on the transaction's `sql`, rolled back with `sql.rollback()`.

export const postgresJsFixture: LayerFixture<TransactionSql> = {
  name: 'postgres-js',
  async open(databaseUrl) {
    const sql = postgres(databaseUrl, { max: 10, onnotice: () => undefined });
    return {
      layer: postgresLayer(sql),
      async insertEffect(tx, effect) {
        await tx`INSERT INTO layer_effects ${tx(effect, 'id', 'door', 'amount')}`;
      },
      async layerRollback(tx) {
        // Rolls back without throwing (begin would resolve): the handler still fails.
        await tx.rollback();
        throw new Error('rolled back with sql.rollback()');
      },
      close: () => sql.end({ timeout: 5 }),
    };
  },
};
