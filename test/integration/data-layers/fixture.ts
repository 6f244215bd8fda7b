import type { DataLayer } from '../../../src/data-layer.js';

// What each data layer's tests bring to the shared guarantee matrix (matrix.ts): the
// layer's bridge over a database, and the effect written in the layer's own idiom (a
// Prisma model's create, a Knex query builder insert, a TypeORM repository, a Drizzle or
// Kysely insert, a postgres.js tagged template), so the matrix proves the guarantee for
// code written as that layer's docs show, not for raw SQL.

/**
 * The effects table every fixture writes to, created by the matrix with SQL:
 * `layer_effects(id text PRIMARY KEY, door text NOT NULL, amount integer NOT NULL)`, with
 * a deferred constraint trigger that fails at COMMIT when `amount < 0`.
 */
export const EFFECTS_TABLE = 'layer_effects';

/** One data layer, opened over one database for one test file. */
export interface OpenedLayer<Tx> {
  readonly layer: DataLayer<Tx>;
  /** Inserts (id, door, amount) into `layer_effects` through `tx`, in the layer's idiom. */
  insertEffect(tx: Tx, effect: { id: string; door: string; amount: number }): Promise<void>;
  /**
   * Rolls the layer's transaction back the layer's own way where it has one (Knex's
   * `trx.rollback()`, TypeORM's query runner, a thrown error otherwise): the handler ends
   * with a rejection either way.
   */
  layerRollback(tx: Tx): Promise<never>;
  /** Ends the layer's pools. */
  close(): Promise<void>;
}

/** A data layer under test. */
export interface LayerFixture<Tx> {
  /** As in `--data-layer`: `prisma`, `drizzle-pg`, `drizzle-postgres-js`, `knex`, `typeorm`, `kysely`, `postgres-js`. */
  readonly name: string;
  /** Opens the layer over `databaseUrl` (a database of its own, tables already made). */
  open(databaseUrl: string): Promise<OpenedLayer<Tx>>;
}
