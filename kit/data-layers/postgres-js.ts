import postgres, { type TransactionSql } from 'postgres';
import { postgresLayer } from 'effectively-once/postgres-js';
import type { LayerRow, OpenedLayer } from './index.js';

/** postgres.js with `poolSize` connections; statements through `tx.unsafe`. */
export async function openPostgresJs(
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer<TransactionSql>> {
  const sql = postgres(databaseUrl, { max: poolSize, onnotice: () => undefined });
  const unsafe = (tx: TransactionSql, text: string, values: readonly unknown[]) =>
    tx.unsafe<LayerRow[]>(text, [...values] as postgres.ParameterOrJSON<never>[]);
  return {
    name: 'postgres-js',
    layer: postgresLayer(sql),
    exec: async (tx, text, values = []) => {
      await unsafe(tx, text, values);
    },
    query: async (tx, text, values = []) => [...(await unsafe(tx, text, values))],
    close: () => sql.end({ timeout: 5 }),
  };
}
