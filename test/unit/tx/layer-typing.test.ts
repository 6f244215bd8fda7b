/**
 * `ctx.tx` is typed by the data layer: createConsumer infers `Tx` from `dataLayer`, a
 * handler written for a pg client does not compile against another layer, and code
 * without a data layer keeps its pg client. Checked by the type checker (npm run
 * typecheck covers test/); the assertions only make jest run the file.
 */
import { describe, expect, it } from '@jest/globals';
import type { Pool, PoolClient } from 'pg';
import { createConsumer, type DataLayer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';

interface OrmTx {
  readonly brand: 'orm-tx';
  insert(row: object): Promise<void>;
}

const layer: DataLayer<OrmTx> = {
  name: 'orm',
  transaction: async (_settings, body) => body({ brand: 'orm-tx', insert: async () => undefined }),
  sql: () => ({ query: async () => ({ rows: [], rowCount: 0 }) }),
  serverError: (error) => error,
};
// Never queried: nothing here starts a consumer.
const pool = { connect: () => undefined } as unknown as Pool;

describe('ctx.tx follows the data layer', () => {
  it('is the layer’s transaction object, per message and per batch', () => {
    const perMessage = createConsumer({
      name: 'typed',
      source: memorySource<{ id: string }>(),
      pool,
      dataLayer: layer,
      handler: async (message, ctx) => {
        const tx: OrmTx = ctx.tx;
        await tx.insert({ id: message.id });
      },
    });
    const batched = createConsumer({
      name: 'typed-batch',
      source: memorySource<{ id: string }>(),
      pool,
      dataLayer: layer,
      batchHandler: async (items, ctx) => {
        for (const item of items) await ctx.tx.insert({ id: item.message.id });
      },
    });
    expect([perMessage, batched]).toHaveLength(2);
  });

  it('refuses a handler written for a pg client against another layer', () => {
    const refused = (): unknown =>
      createConsumer({
        name: 'mistyped',
        source: memorySource<{ id: string }>(),
        pool,
        // @ts-expect-error: the handler wants a PoolClient, the layer's transactions are OrmTx
        dataLayer: layer,
        handler: async (_message, ctx: { tx: PoolClient }) => void ctx.tx.release(),
      });
    expect(typeof refused).toBe('function');
  });

  it('stays a pg client without a data layer', () => {
    const raw = createConsumer({
      name: 'raw',
      source: memorySource<{ id: string }>(),
      pool,
      handler: async (_message, ctx) => {
        const client: PoolClient = ctx.tx;
        await client.query('SELECT 1');
      },
    });
    expect(raw).toBeDefined();
  });
});
