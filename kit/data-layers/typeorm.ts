import 'reflect-metadata';
import { DataSource, type EntityManager } from 'typeorm';
import { typeormLayer } from 'effectively-once/typeorm';
import type { LayerRow, OpenedLayer } from './index.js';

/** TypeORM's postgres driver (pg underneath, a pool of `poolSize`); statements through `manager.query`. */
export async function openTypeorm(
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer<EntityManager>> {
  const dataSource = new DataSource({
    type: 'postgres',
    url: databaseUrl,
    poolSize,
    entities: [],
    synchronize: false,
    logging: false,
  });
  await dataSource.initialize();
  return {
    name: 'typeorm',
    layer: typeormLayer(dataSource),
    exec: async (tx, text, values = []) => {
      await tx.query(text, [...values]);
    },
    query: (tx, text, values = []) => tx.query<LayerRow[]>(text, [...values]),
    close: () => dataSource.destroy(),
  };
}
