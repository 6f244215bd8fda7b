/**
 * A user's data layer for the harnesses (chaos, bench): `--data-layer NAME` opens one
 * with {@link openDataLayer}, passes its `layer` as a door's `dataLayer`, and writes the
 * handler's effect with {@link OpenedLayer.exec}, the layer's own raw-SQL call on the
 * layer's own transaction object (`ctx.tx`). `pg` is no layer: the door's own pg client,
 * as before. Each layer's opener is loaded only when named, so a `pg` run loads none of
 * their packages.
 */
import type { DataLayer } from 'effectively-once';

/** Every `--data-layer` name; `pg` (the default) is the raw pool, no data layer. */
export const DATA_LAYERS = [
  'pg',
  'prisma',
  'drizzle-pg',
  'drizzle-postgres-js',
  'knex',
  'typeorm',
  'kysely',
  'postgres-js',
] as const;

export type DataLayerName = (typeof DATA_LAYERS)[number];

/** The layers proper: every name but `pg`. */
export type LayerName = Exclude<DataLayerName, 'pg'>;

/** One row as the layer's raw call decodes it. */
export type LayerRow = Record<string, unknown>;

/** A data layer opened on a database, with the raw calls a handler writes through it. */
export interface OpenedLayer<Tx = unknown> {
  readonly name: LayerName;
  /** The door's `dataLayer`. */
  readonly layer: DataLayer<Tx>;
  /**
   * Runs one statement (`$1…` placeholders bound to `values`) inside `tx` with the
   * layer's own raw-SQL call, as a handler would write its effect: Prisma's
   * `$executeRawUnsafe`, Knex's `trx.raw`, TypeORM's `manager.query`, Drizzle's
   * `tx.execute(sql…)`, Kysely's `executeQuery`, postgres.js's `tx.unsafe`.
   */
  exec(tx: Tx, text: string, values?: readonly unknown[]): Promise<void>;
  /** The same call, answering the rows (Prisma: `$queryRawUnsafe`). */
  query(tx: Tx, text: string, values?: readonly unknown[]): Promise<LayerRow[]>;
  /** Ends the layer's connections. */
  close(): Promise<void>;
}

/** How one layer is opened: `poolSize` connections at most, on `databaseUrl`. */
export type LayerOpener = (databaseUrl: string, poolSize: number) => Promise<OpenedLayer>;

/** Layer name → its opener's module, imported only when that layer is asked for. */
const OPENERS: Record<LayerName, () => Promise<LayerOpener>> = {
  prisma: async () => (await import('./prisma.js')).openPrisma,
  'drizzle-pg': async () => (await import('./drizzle.js')).openDrizzlePg,
  'drizzle-postgres-js': async () => (await import('./drizzle.js')).openDrizzlePostgresJs,
  knex: async () => (await import('./knex.js')).openKnex,
  typeorm: async () => (await import('./typeorm.js')).openTypeorm,
  kysely: async () => (await import('./kysely.js')).openKysely,
  'postgres-js': async () => (await import('./postgres-js.js')).openPostgresJs,
};

/** Opens the layer `name` with at most `poolSize` connections to `databaseUrl`. */
export async function openDataLayer(
  name: LayerName,
  databaseUrl: string,
  poolSize: number,
): Promise<OpenedLayer> {
  const open = await OPENERS[name]();
  return open(databaseUrl, poolSize);
}

/** Whether `name` is a `--data-layer` name. */
export function isDataLayerName(name: string): name is DataLayerName {
  return (DATA_LAYERS as readonly string[]).includes(name);
}
