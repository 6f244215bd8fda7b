import pg from 'pg';
import type { DataLayer, LayerTransactionSettings } from '../../../src/data-layer.js';
import type { LayerFixture, OpenedLayer } from './fixture.js';

// The reference data layer, for the matrices' own tests: a plain pg Pool with a
// callback transaction (BEGIN, body, COMMIT or ROLLBACK on one checked-out client), the
// shape every real layer's `transaction` has. Test-only: the library ships no such layer
// (without one, the doors open the transaction on `pool` themselves).

/** `body` on one client of `pool` between BEGIN and COMMIT (ROLLBACK when it throws). */
export function pgCallbackLayer(pool: pg.Pool): DataLayer<pg.PoolClient> {
  return {
    name: 'pg-callback',
    async transaction<T>(
      settings: LayerTransactionSettings,
      body: (tx: pg.PoolClient) => Promise<T>,
    ): Promise<T> {
      void settings;
      const client = await pool.connect();
      // A checked-out client whose socket dies emits 'error'; unhandled, that ends the process.
      const onError = (): void => undefined;
      client.on('error', onError);
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        let value: T;
        try {
          value = await body(client);
        } catch (error) {
          await client.query('ROLLBACK').catch((rollbackError: unknown) => {
            broken = rollbackError instanceof Error ? rollbackError : new Error('rollback failed');
          });
          throw error;
        }
        try {
          await client.query('COMMIT');
        } catch (error) {
          broken = error instanceof Error ? error : new Error('commit failed');
          throw error;
        }
        return value;
      } finally {
        client.off('error', onError);
        client.release(broken);
      }
    },
    sql: (tx) => tx,
    serverError: (error) => error,
  };
}

export const pgLayerFixture: LayerFixture<pg.PoolClient> = {
  name: 'pg-callback',
  async open(databaseUrl: string): Promise<OpenedLayer<pg.PoolClient>> {
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });
    // Terminated backends (the matrix kills some on purpose) surface here on idle clients.
    pool.on('error', () => undefined);
    return {
      layer: pgCallbackLayer(pool),
      insertEffect: async (tx, effect) => {
        await tx.query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3)', [
          effect.id,
          effect.door,
          effect.amount,
        ]);
      },
      layerRollback: async (tx) => {
        // The handler ends the transaction itself, then fails: nothing may commit.
        await tx.query('ROLLBACK');
        throw new Error('rolled back by the handler');
      },
      close: () => pool.end(),
    };
  },
};
