import pg from 'pg';
import { CompiledQuery, Kysely, PostgresDialect, type Transaction } from 'kysely';
import { kyselyLayer } from 'effectively-once/kysely';
import type { LayerRow, OpenedLayer } from './index.js';

/** Kysely's PostgresDialect over a pg Pool of `poolSize`; statements as `CompiledQuery.raw`. */
export async function openKysely(
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer<Transaction<unknown>>> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  pool.on('error', () => undefined); // Postgres restarts on purpose (chaos)
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  const run = (tx: Transaction<unknown>, text: string, values: readonly unknown[]) =>
    tx.executeQuery<LayerRow>(CompiledQuery.raw(text, [...values]));
  return {
    name: 'kysely',
    layer: kyselyLayer(db, { pool }),
    exec: async (tx, text, values = []) => {
      await run(tx, text, values);
    },
    query: async (tx, text, values = []) => [...(await run(tx, text, values)).rows],
    close: () => db.destroy(),
  };
}
