import knexFactory, { type Knex } from 'knex';
import { knexLayer } from '../../../adapters/knex/index.js';
import { EFFECTS_TABLE, type LayerFixture } from './fixture.js';

/**
 * Knex 3 over node-postgres: the effect is a query-builder insert on the handler's
 * `trx`, and the layer's own rollback is `trx.rollback()`.
 */
export const knexFixture: LayerFixture<Knex.Transaction> = {
  name: 'knex',
  async open(databaseUrl) {
    const knex = knexFactory({ client: 'pg', connection: databaseUrl, pool: { min: 0, max: 10 } });
    return {
      layer: knexLayer(knex),
      async insertEffect(trx, effect) {
        await trx(EFFECTS_TABLE).insert(effect);
      },
      async layerRollback(trx) {
        await trx.rollback();
        throw new Error('the handler rolled back with trx.rollback()');
      },
      close: () => knex.destroy(),
    };
  },
};
