/**
 * A reference data layer over node-postgres, for the matrices' own tests: the layer
 * opens the transaction (BEGIN on a client of its own pool), runs the body, COMMITs when
 * it resolves and ROLLBACKs when it rejects, as DataLayer asks of every bridge. The
 * effect is a plain parameterised INSERT on the client.
 */
import pg from 'pg';
import type { DataLayer, LayerTransactionSettings, SqlResult } from '../../../src/data-layer.js';
import type { LayerFixture, OpenedLayer } from './fixture.js';

/** A DataLayer over `pool`: `tx` is the transaction's checked-out client. */
export function pgLayer(pool: pg.Pool): DataLayer<pg.PoolClient> {
  return {
    name: 'pg',
    async transaction<T>(
      _settings: LayerTransactionSettings,
      body: (tx: pg.PoolClient) => Promise<T>,
    ): Promise<T> {
      const client = await pool.connect();
      let lost: unknown;
      const onError = (err: Error): void => {
        lost ??= err;
      };
      client.on('error', onError);
      const release = (failure?: unknown): void => {
        client.off('error', onError);
        client.release(failure === undefined ? undefined : toError(failure));
      };
      try {
        await client.query('BEGIN');
      } catch (error) {
        release(error);
        throw error;
      }
      let value: T;
      try {
        value = await body(client);
      } catch (error) {
        try {
          await client.query('ROLLBACK');
          release(lost);
        } catch (rollbackError) {
          release(rollbackError);
        }
        throw error;
      }
      try {
        const result = await client.query('COMMIT');
        // An aborted transaction answers COMMIT with ROLLBACK, no error: not committed.
        if (result.command !== 'COMMIT') throw new Error(`COMMIT answered ${result.command}`);
      } catch (error) {
        release(error);
        throw error;
      }
      release(lost);
      return value;
    },
    sql: (tx) => ({
      query: async <R extends object>(text: string, values?: readonly unknown[]) => {
        const result = await tx.query(text, values === undefined ? undefined : [...values]);
        return { rows: result.rows as R[], rowCount: result.rowCount } satisfies SqlResult<R>;
      },
    }),
    serverError: (error) => error,
  };
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** The reference layer as a matrix fixture. */
export const pgLayerFixture: LayerFixture<pg.PoolClient> = {
  name: 'pg',
  open: async (databaseUrl): Promise<OpenedLayer<pg.PoolClient>> => {
    const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });
    pool.on('error', () => undefined);
    return {
      layer: pgLayer(pool),
      insertEffect: async (tx, { id, door, amount }) => {
        await tx.query('INSERT INTO layer_effects (id, door, amount) VALUES ($1, $2, $3)', [
          id,
          door,
          amount,
        ]);
      },
      layerRollback: () => Promise.reject(new Error('rolled back by the layer')),
      close: () => pool.end(),
    };
  },
};
