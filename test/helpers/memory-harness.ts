import {
  createConsumer,
  type Consumer,
  type ConsumerOptions,
  type HandlerContext,
} from '../../src/index.js';
import { memorySource, type MemorySource } from '../../src/testing/index.js';
import type { TestDatabase } from './db.js';

/** Message body used by the core tests: an order id and an amount to charge. */
export interface Charge {
  id: string;
  amount: number;
}

/** A consumer over a memory source whose handler inserts one `charges` row per effect. */
export interface MemoryHarness {
  source: MemorySource<Charge>;
  consumer: Consumer;
  /** Rows in `charges`, i.e. effects applied. */
  effects(): Promise<Array<{ id: string; amount: number }>>;
}

/**
 * Builds the standard harness. `before` runs inside the transaction before the
 * effect; `after` after it (both may throw or block to stage a failure).
 */
export async function memoryHarness(
  db: TestDatabase,
  options: Partial<ConsumerOptions<Charge>> & {
    before?: (message: Charge, ctx: HandlerContext<Charge>) => Promise<void>;
    after?: (message: Charge, ctx: HandlerContext<Charge>) => Promise<void>;
  } = {},
): Promise<MemoryHarness> {
  await db.pool.query('CREATE TABLE IF NOT EXISTS charges (id text NOT NULL, amount int NOT NULL)');
  const source = memorySource<Charge>();
  const { before, after, ...rest } = options;
  const consumer = createConsumer<Charge>({
    name: 'charges',
    source,
    pool: db.pool,
    schema: db.schema,
    backoff: { initialMs: 5, maxMs: 20 },
    busyRetryDelayMs: 50,
    handler: async (message, ctx) => {
      await before?.(message, ctx);
      await ctx.tx.query('INSERT INTO charges (id, amount) VALUES ($1, $2)', [
        message.id,
        message.amount,
      ]);
      await after?.(message, ctx);
    },
    ...rest,
  });
  return {
    source,
    consumer,
    effects: async () =>
      (
        await db.pool.query<{ id: string; amount: number }>(
          'SELECT id, amount FROM charges ORDER BY id',
        )
      ).rows,
  };
}
