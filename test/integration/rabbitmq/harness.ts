import { afterAll, afterEach, beforeAll } from '@jest/globals';
import amqp, { type ChannelModel, type Options } from 'amqplib';
import { createConsumer, type Consumer, type ConsumerOptions } from '../../../src/index.js';
import { rabbitmqSource, type RabbitmqSourceOptions } from '../../../adapters/rabbitmq/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { recordEffect, type Effect, type Job } from './effects.js';

export { counts, recordEffect, type Effect, type Job } from './effects.js';

export const TIMEOUT = 60_000;

/** The test node's AMQP URL (kit/services, EO_SERVICES=…,rabbitmq). */
export function rabbitmqUrl(): string {
  const url = process.env['RABBITMQ_URL'];
  if (!url) throw new Error('RABBITMQ_URL is not set: run with EO_SERVICES=postgres,rabbitmq');
  return url;
}

let counter = 0;
/** A queue name no other test (or run) uses. */
export function unique(prefix: string): string {
  return `${prefix}-${process.pid}-${Date.now().toString(36)}-${++counter}`;
}

/**
 * Per test file: a fresh schema with an `effects` table (no unique constraint, so a
 * doubled effect shows as two rows), an admin connection, consumers stopped after each test.
 */
export function rabbitmqIntegration(file: string, url: () => string = rabbitmqUrl) {
  const state = {} as { db: TestDatabase };
  const consumers: Consumer[] = [];
  /** A connection per admin operation: tests that restart the node would break a long-lived one. */
  const withAdmin = async <R>(use: (admin: ChannelModel) => Promise<R>): Promise<R> => {
    const admin = await amqp.connect(url());
    admin.on('error', () => undefined);
    try {
      return await use(admin);
    } finally {
      await admin.close().catch(() => undefined);
    }
  };

  beforeAll(async () => {
    state.db = await createTestDatabase(`rmq_${file}`);
    await state.db.pool.query(
      'CREATE TABLE effects (n bigserial PRIMARY KEY, id text NOT NULL, worker text NOT NULL, attempt int NOT NULL)',
    );
  });
  afterEach(async () => {
    await Promise.all(consumers.splice(0).map((c) => c.stop({ timeoutMs: 5_000 })));
    await state.db.pool.query('TRUNCATE effects');
  });
  afterAll(async () => {
    await state.db?.close();
  });

  const api = {
    get db() {
      return state.db;
    },
    withAdmin,
    /** Declares a durable queue of `type`; its own dead-letter exchange if `dlx` is given. */
    async queue(
      type: 'classic' | 'quorum',
      name = unique(type),
      args: Record<string, unknown> = {},
    ): Promise<string> {
      await withAdmin(async (admin) => {
        const channel = await admin.createChannel();
        await channel.assertQueue(name, {
          durable: true,
          arguments: { 'x-queue-type': type, ...args },
        });
      });
      return name;
    },
    /** Publishes with confirms to the queue through the default exchange. */
    async send(
      queue: string,
      messages: Array<{ body: unknown; options?: Options.Publish }>,
    ): Promise<void> {
      await withAdmin(async (admin) => {
        const channel = await admin.createConfirmChannel();
        for (const m of messages)
          channel.sendToQueue(queue, Buffer.from(JSON.stringify(m.body)), {
            persistent: true,
            ...m.options,
          });
        await channel.waitForConfirms();
      });
    },
    /** Messages ready in `queue` (not counting unacked ones). */
    async depth(queue: string): Promise<number> {
      return withAdmin(
        async (admin) => (await (await admin.createChannel()).checkQueue(queue)).messageCount,
      );
    },
    /** Starts a consumer over `rabbitmqSource`; short backoffs suit tests. */
    async worker(
      source: Partial<RabbitmqSourceOptions<Job>> & { queue: string },
      options: Partial<ConsumerOptions<Job>> = {},
    ): Promise<Consumer> {
      const consumer = createConsumer<Job>({
        name: 'rmq-it',
        pool: state.db.pool,
        schema: state.db.schema,
        source: rabbitmqSource<Job>({
          ...(source.connection === undefined ? { url: url() } : {}),
          reconnectBackoff: { initialMs: 100, maxMs: 1000 },
          ...source,
        }),
        backoff: { initialMs: 10, maxMs: 20 },
        handler: async (job, ctx) => {
          await recordEffect(ctx.tx, job.id, 'w', ctx.attempt);
        },
        ...options,
      });
      consumers.push(consumer);
      await consumer.start();
      return consumer;
    },
    async effects(): Promise<Effect[]> {
      const { rows } = await state.db.pool.query<Effect>(
        'SELECT id, worker, attempt FROM effects ORDER BY n',
      );
      return rows;
    },
  };
  return api;
}
