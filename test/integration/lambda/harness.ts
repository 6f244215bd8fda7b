import { afterAll, afterEach, beforeAll } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { TestQueues } from '../../helpers/sqs.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  EventSourceMapping,
  type EventSourceMappingOptions,
} from '../../../kit/lambda/event-source-mapping.js';
import type { Invoker } from '../../../kit/lambda/invoker.js';

// Explicit per test: a project-level testTimeout is not applied by jest.
export const TIMEOUT = 90_000;

/** One applied effect: a row per run of a handler that committed. */
export interface Effect {
  n: number;
  id: string;
  attempt: number;
}

/**
 * Per test file: a fresh schema with an `effects` table (no unique constraint, so a doubled
 * effect shows as two rows), unique queues, and the mappings and invokers stopped after
 * each test.
 */
export function lambdaIntegration(file: string) {
  const state = {} as { db: TestDatabase; queues: TestQueues };
  const mappings: EventSourceMapping[] = [];
  const invokers: Invoker[] = [];

  beforeAll(async () => {
    state.db = await createTestDatabase(`lambda_${file}`);
    state.queues = new TestQueues();
    await state.db.pool.query(
      `CREATE TABLE effects (n bigserial PRIMARY KEY, id text NOT NULL, attempt int NOT NULL)`,
    );
  });
  afterEach(async () => {
    await Promise.all(mappings.splice(0).map((m) => m.stop()));
    await Promise.all(invokers.splice(0).map((i) => i.close()));
    await state.db.pool.query('TRUNCATE effects');
  });
  afterAll(async () => {
    await state.queues.cleanup();
    await state.db.close();
  });

  return {
    get db() {
      return state.db;
    },
    get queues() {
      return state.queues;
    },
    /** Starts an event source mapping on `queueUrl` invoking through `invoker`. */
    mapping(options: Omit<EventSourceMappingOptions, 'client'>): EventSourceMapping {
      const mapping = new EventSourceMapping({ client: state.queues.client, ...options });
      mappings.push(mapping);
      invokers.push(options.invoker);
      mapping.start();
      return mapping;
    },
    async effects(): Promise<Effect[]> {
      const { rows } = await state.db.pool.query<Effect>(
        'SELECT n::int, id, attempt FROM effects ORDER BY n',
      );
      return rows;
    },
    /** Waits until the queue holds nothing (visible, in flight or delayed). */
    async drained(url: string, timeoutMs = 60_000): Promise<void> {
      await waitFor(async () => (await state.queues.depth(url)).total === 0, {
        what: 'queue drained',
        timeoutMs,
      });
    },
  };
}

/** The handlers' effect: one row in `effects`, through the claim's transaction. */
export async function recordEffect(
  tx: { query: (sql: string, values: unknown[]) => Promise<unknown> },
  id: string,
  attempt: number,
): Promise<void> {
  await tx.query('INSERT INTO effects (id, attempt) VALUES ($1, $2)', [id, attempt]);
}

/** Ids applied more than once. */
export function doubles(effects: ReadonlyArray<Effect>): string[] {
  const seen = new Map<string, number>();
  for (const e of effects) seen.set(e.id, (seen.get(e.id) ?? 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([id]) => id);
}
