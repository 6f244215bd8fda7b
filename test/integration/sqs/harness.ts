import { afterAll, afterEach, beforeAll } from '@jest/globals';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { createConsumer, type Consumer, type ConsumerOptions } from '../../../src/index.js';
import { sqsSource, type SqsSourceOptions } from '../../../adapters/sqs/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { TestQueues } from '../../helpers/sqs.js';

/** Body of the test messages: a logical id, plus a group and sequence for FIFO tests. */
export interface Job {
  id: string;
  group?: string;
  seq?: number;
}

/** One applied effect, as the handlers record it in `effects`. */
export interface Effect {
  n: number;
  id: string;
  worker: string;
  attempt: number;
  receipt: string | null;
}

// Explicit per test: a project-level testTimeout is not applied by jest.
export const TIMEOUT = 60_000;

/**
 * Per test file: a fresh schema with an `effects` table (no unique constraint, so a
 * doubled effect shows as two rows), unique queues, and consumers stopped after each test.
 */
export function sqsIntegration(file: string) {
  const state = {} as { db: TestDatabase; queues: TestQueues };
  const consumers: Consumer[] = [];

  beforeAll(async () => {
    state.db = await createTestDatabase(`sqs_${file}`);
    state.queues = new TestQueues();
    await state.db.pool.query(
      `CREATE TABLE effects (n bigserial PRIMARY KEY, id text NOT NULL, worker text NOT NULL,
         attempt int NOT NULL, receipt text)`,
    );
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop({ timeoutMs: 2_000 })));
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
    /** Starts a consumer over `sqsSource`; defaults suit short tests (1 s polls, ms backoff). */
    async worker(
      source: Omit<SqsSourceOptions<Job>, 'client'> & { client?: SQSClient },
      options: Partial<ConsumerOptions<Job>> = {},
    ): Promise<Consumer> {
      const consumer = createConsumer<Job>({
        name: 'sqs-it',
        pool: state.db.pool,
        schema: state.db.schema,
        source: sqsSource<Job>({ client: state.queues.client, waitTimeSeconds: 1, ...source }),
        backoff: { initialMs: 10, maxMs: 20 },
        handler: async (job, ctx) => {
          await recordEffect(ctx.tx, job.id, 'w', ctx.attempt, null);
        },
        ...options,
      });
      consumers.push(consumer);
      await consumer.start();
      return consumer;
    },
    async effects(): Promise<Effect[]> {
      const { rows } = await state.db.pool.query<Effect>(
        'SELECT n::int, id, worker, attempt, receipt FROM effects ORDER BY n',
      );
      return rows;
    },
  };
}

/** The handlers' effect: one row in `effects`, through the claim's transaction. */
export async function recordEffect(
  tx: { query: (sql: string, values: unknown[]) => Promise<unknown> },
  id: string,
  worker: string,
  attempt: number,
  receipt: string | null,
): Promise<void> {
  await tx.query('INSERT INTO effects (id, worker, attempt, receipt) VALUES ($1, $2, $3, $4)', [
    id,
    worker,
    attempt,
    receipt,
  ]);
}
