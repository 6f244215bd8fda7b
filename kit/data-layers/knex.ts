import knexFactory, { type Knex } from 'knex';
import { knexLayer } from 'effectively-once/knex';
import type { LayerRow, OpenedLayer } from './index.js';
import { positional } from './positional.js';

/** Knex over pg: a pool of `poolSize`; statements through `trx.raw` with `?` bindings. */
export async function openKnex(
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer<Knex.Transaction>> {
  const knex = knexFactory({
    client: 'pg',
    connection: databaseUrl,
    pool: { min: 0, max: poolSize },
  });
  const raw = (tx: Knex.Transaction, text: string, values: readonly unknown[]) => {
    const p = positional(text, values);
    return tx.raw(p.text, p.values as Knex.RawBinding[]);
  };
  return {
    name: 'knex',
    layer: knexLayer(knex),
    exec: async (tx, text, values = []) => {
      await raw(tx, text, values);
    },
    query: async (tx, text, values = []) =>
      ((await raw(tx, text, values)) as { rows: LayerRow[] }).rows,
    close: () => knex.destroy(),
  };
}
