import pg from 'pg';
import postgres from 'postgres';
import { sql, type SQL } from 'drizzle-orm';
import { drizzle as drizzlePg } from 'drizzle-orm/node-postgres';
import { drizzle as drizzlePostgresJs } from 'drizzle-orm/postgres-js';
import { drizzleLayer } from 'effectively-once/drizzle';
import type { LayerRow, OpenedLayer } from './index.js';

/** What the harness calls on a Drizzle transaction, whichever the driver. */
interface DrizzleTx {
  execute(query: SQL): PromiseLike<unknown>;
}

/** `$1…` text and its values as Drizzle's `sql`: raw chunks with `sql.param`s between. */
export function drizzleSql(text: string, values: readonly unknown[]): SQL {
  const chunks: SQL[] = [];
  let last = 0;
  for (const match of text.matchAll(/\$(\d+)/g)) {
    chunks.push(sql.raw(text.slice(last, match.index)));
    chunks.push(sql`${sql.param(values[Number(match[1]) - 1])}`);
    last = match.index + match[0].length;
  }
  chunks.push(sql.raw(text.slice(last)));
  return sql.join(chunks);
}

/** Rows of `tx.execute`: pg's `QueryResult.rows`, or postgres.js's row list itself. */
function rowsOf(result: unknown): LayerRow[] {
  if (Array.isArray(result)) return [...(result as LayerRow[])];
  return (result as { rows?: LayerRow[] }).rows ?? [];
}

function opened(
  name: 'drizzle-pg' | 'drizzle-postgres-js',
  layer: OpenedLayer<DrizzleTx>['layer'],
  close: () => Promise<void>,
): OpenedLayer<DrizzleTx> {
  return {
    name,
    layer,
    exec: async (tx, text, values = []) => {
      await tx.execute(drizzleSql(text, values));
    },
    query: async (tx, text, values = []) => rowsOf(await tx.execute(drizzleSql(text, values))),
    close,
  };
}

/** Drizzle over node-postgres: a pg Pool of `poolSize`. */
export async function openDrizzlePg(
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer<DrizzleTx>> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: poolSize });
  pool.on('error', () => undefined); // Postgres restarts on purpose (chaos)
  const layer = drizzleLayer(drizzlePg(pool)) as unknown as OpenedLayer<DrizzleTx>['layer'];
  return opened('drizzle-pg', layer, () => pool.end());
}

/** Drizzle over postgres.js: `poolSize` connections. */
export async function openDrizzlePostgresJs(
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer<DrizzleTx>> {
  const client = postgres(databaseUrl, { max: poolSize, onnotice: () => undefined });
  const layer = drizzleLayer(
    drizzlePostgresJs(client),
  ) as unknown as OpenedLayer<DrizzleTx>['layer'];
  return opened('drizzle-postgres-js', layer, () => client.end({ timeout: 5 }));
}
