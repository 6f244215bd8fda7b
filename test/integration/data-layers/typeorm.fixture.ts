import { DataSource, EntitySchema, type EntityManager } from 'typeorm';
import type { PostgresDataSourceOptions } from 'typeorm/driver/postgres/PostgresDataSourceOptions.js';
import { typeormLayer } from 'effectively-once/typeorm';
import { EFFECTS_TABLE, type LayerFixture } from './fixture.js';

/** A row of `layer_effects`, as the TypeORM entity below maps it. */
export interface LayerEffect {
  id: string;
  door: string;
  amount: number;
}

/** `layer_effects` as a TypeORM entity, declared without decorators. */
export const LayerEffectEntity = new EntitySchema<LayerEffect>({
  name: 'LayerEffect',
  tableName: EFFECTS_TABLE,
  columns: {
    id: { type: 'text', primary: true },
    door: { type: 'text' },
    amount: { type: 'integer' },
  },
});

/**
 * A DataSource over `databaseUrl` with the effects entity (the tables exist already);
 * `options` adds to the postgres options (an `isolationLevel`, a `poolSize`).
 */
export async function openDataSource(
  databaseUrl: string,
  options: Partial<Pick<PostgresDataSourceOptions, 'isolationLevel' | 'poolSize'>> = {},
): Promise<DataSource> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: databaseUrl,
    entities: [LayerEffectEntity],
    applicationName: 'eo-typeorm-fixture',
    ...options,
  });
  return dataSource.initialize();
}

/**
 * TypeORM 1.x (postgres driver). The effect is a repository `insert` (one INSERT, which
 * fails on a duplicate id, where `save` would read first and update). The layer's own
 * rollback is the query runner's: `tx.queryRunner.rollbackTransaction()` (TypeORM's
 * documented manual-transaction call) sends ROLLBACK, then the handler throws; the
 * ROLLBACK that `dataSource.transaction` then tries finds no transaction active and is
 * skipped.
 */
export const typeormFixture: LayerFixture<EntityManager> = {
  name: 'typeorm',
  async open(databaseUrl) {
    const dataSource = await openDataSource(databaseUrl);
    return {
      layer: typeormLayer(dataSource),
      async insertEffect(tx, effect) {
        await tx.getRepository(LayerEffectEntity).insert(effect);
      },
      async layerRollback(tx) {
        const runner = tx.queryRunner;
        if (runner === undefined)
          throw new Error('the handler got an EntityManager with no query runner');
        await runner.rollbackTransaction();
        throw new Error("rolled back with the TypeORM query runner's rollbackTransaction()");
      },
      close: () => dataSource.destroy(),
    };
  },
};
