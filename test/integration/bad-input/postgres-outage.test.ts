/**
 * Postgres unreachable at start and mid-run, for one consumer over real SQS (ElasticMQ):
 * its pool goes through a TCP proxy the test takes down and brings back, so the shared
 * Postgres other test files use is never touched. (Crash-restarts of a real Postgres
 * under several worker processes are the chaos harness's job: test/integration/chaos.)
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer, migrate } from '../../../src/index.js';
import { sqsSource } from '../../../adapters/sqs/index.js';
import { databaseUrl } from '../../helpers/env.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, badInputSuite, keyAttribute, observe, type Observed } from './harness.js';
import { FaultProxy } from '../../../kit/fault-proxy.js';

const suite = badInputSuite('pg_outage');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
});

/** A proxy to the test Postgres (down until `up()`), and a pool that connects through it. */
async function proxiedPool(): Promise<{ proxy: FaultProxy; pool: pg.Pool }> {
  const url = new URL(databaseUrl());
  const proxy = await FaultProxy.create({
    target: { host: url.hostname, port: Number(url.port) },
  });
  url.port = String(proxy.port);
  const pool = new pg.Pool({
    connectionString: url.toString(),
    options: `-c search_path=${suite.db.schema}`,
    max: 10,
    connectionTimeoutMillis: 2000,
  });
  pool.on('error', () => undefined); // dropped on purpose
  cleanups.push(async () => {
    await proxy.down();
    await pool.end().catch(() => undefined);
  });
  return { proxy, pool };
}

/** Sends `count` messages with keys k-0..k-(count-1), and `duplicates` re-sends of the first ones. */
async function sendAll(url: string, count: number, duplicates: number): Promise<void> {
  for (let i = 0; i < count + duplicates; i++) {
    const n = i % count;
    await suite.queues.send(url, JSON.stringify({ id: `k-${n}` }), {
      MessageAttributes: keyAttribute(`k-${n}`),
    });
  }
}

/** Every key applied exactly once: no double, no loss. */
async function expectExactlyOnce(count: number): Promise<void> {
  const { rows } = await suite.db.pool.query<{ key: string; n: number }>(
    'SELECT key, count(*)::int AS n FROM effects GROUP BY key',
  );
  expect(rows.filter((r) => r.n !== 1)).toEqual([]);
  expect(rows.map((r) => r.key).sort()).toEqual(
    Array.from({ length: count }, (_, i) => `k-${i}`).sort(),
  );
}

/** Failures during an outage are infrastructure failures: all retried, nothing dead-lettered. */
function expectOnlyRetries(worker: Observed): void {
  expect(worker.failed.length).toBeGreaterThan(0);
  expect(worker.failed.filter((f) => !f.willRetry)).toEqual([]);
  const infrastructure = ['EO_DATABASE', 'EO_COMMIT_UNKNOWN', 'EO_HANDLER'];
  expect(
    worker.failed.map((f) => f.error.code).filter((code) => !infrastructure.includes(code)),
  ).toEqual([]);
  expect(worker.deadLettered).toEqual([]);
}

describe('Postgres unreachable', () => {
  it(
    'at start, with migrate on: start() rejects with a retryable EO_DATABASE error; once reachable, a new start() works',
    async () => {
      const { proxy, pool } = await proxiedPool();
      const { url } = await suite.queues.create('pg-start', { visibilityTimeout: 10 });
      await sendAll(url, 5, 0);
      const make = () =>
        suite.track(
          createConsumer({
            ...suite.options({ pool }),
            source: sqsSource({
              client: suite.queues.client,
              queueUrl: url,
              key: 'Idempotency-Key',
              waitTimeSeconds: 1,
            }),
          }),
        );
      await expect(make().start()).rejects.toMatchObject({
        code: 'EO_DATABASE',
        retryable: true,
        details: { operation: 'connect (migrate)' },
      });
      await proxy.up();
      const consumer = make();
      await consumer.start();
      await waitFor(() => consumer.stats().processed === 5, { what: '5 processed' });
      await expectExactlyOnce(5);
    },
    TIMEOUT,
  );

  it(
    'at start, with migrate off: the consumer starts, pauses deliveries while the database is away, then applies everything once',
    async () => {
      await migrate(suite.db.pool, { schema: suite.db.schema });
      const { proxy, pool } = await proxiedPool();
      const { url } = await suite.queues.create('pg-start-nomigrate', { visibilityTimeout: 10 });
      await sendAll(url, 20, 5);
      const consumer = suite.track(
        createConsumer({
          ...suite.options({ pool, migrate: false, maxAttempts: 2 }),
          source: sqsSource({
            client: suite.queues.client,
            queueUrl: url,
            key: 'Idempotency-Key',
            waitTimeSeconds: 1,
          }),
        }),
      );
      const worker = observe(consumer);
      await consumer.start();
      await waitFor(() => worker.failed.length > 0, { what: 'a failed connect' });
      await sleep(1500); // well past maxAttempts worth of receives, had they been spent
      expect(consumer.stats().processed).toBe(0);
      await proxy.up();
      await waitFor(() => consumer.stats().processed === 20 && consumer.stats().duplicates === 5, {
        what: 'all settled',
        timeoutMs: 30_000,
      });
      await waitFor(async () => (await suite.queues.depth(url)).total === 0, {
        what: 'queue empty',
      });
      await expectExactlyOnce(20);
      expectOnlyRetries(worker);
      expect(worker.failed[0]?.error).toMatchObject({
        code: 'EO_DATABASE',
        details: { operation: 'connect' },
      });
    },
    TIMEOUT,
  );

  it(
    'mid-run: connections dropped (some mid-COMMIT) and refused for 3 s; the consumer waits, recovers, and nothing is lost or doubled',
    async () => {
      await migrate(suite.db.pool, { schema: suite.db.schema });
      const { proxy, pool } = await proxiedPool();
      await proxy.up();
      const { url } = await suite.queues.create('pg-midrun', { visibilityTimeout: 10 });
      const count = 200;
      await sendAll(url, count, 40);
      let calls = 0;
      let outage: Promise<void> | undefined;
      const consumer = suite.track(
        createConsumer({
          ...suite.options({ pool, migrate: false, concurrency: 8, maxAttempts: 2 }),
          handler: async (message: { id: string }, ctx) => {
            await ctx.tx.query('INSERT INTO effects (key, message) VALUES ($1, $2)', [
              ctx.key,
              JSON.stringify(message),
            ]);
            // The 60th handler call cuts the database off while it and its siblings are
            // inside their transactions: their COMMITs go to dead connections.
            if (++calls === 60) {
              outage = (async () => {
                await proxy.down();
                await sleep(3000);
                await proxy.up();
              })();
            }
            await sleep(20);
          },
          source: sqsSource<{ id: string }>({
            client: suite.queues.client,
            queueUrl: url,
            key: 'Idempotency-Key',
            waitTimeSeconds: 1,
          }),
        }),
      );
      const worker = observe(consumer);
      await consumer.start();
      await waitFor(() => outage !== undefined, { what: 'the outage to begin' });
      await outage;
      await waitFor(
        async () =>
          (
            await suite.db.pool.query<{ n: number }>(
              'SELECT count(DISTINCT key)::int AS n FROM effects',
            )
          ).rows[0]?.n === count,
        { what: `${count} keys applied`, timeoutMs: 40_000 },
      );
      await waitFor(async () => (await suite.queues.depth(url)).total === 0, {
        what: 'queue empty',
        timeoutMs: 30_000,
      });
      await expectExactlyOnce(count);
      expectOnlyRetries(worker);
      // Transactions were open when the connections dropped: their COMMIT went to a dead
      // connection (unknown), or the client saw the connection die first (EO_DATABASE:
      // COMMIT never sent) or under a handler statement (EO_HANDLER, as infrastructure).
      expect(
        worker.failed.some((f) =>
          ['EO_COMMIT_UNKNOWN', 'EO_DATABASE', 'EO_HANDLER'].includes(f.error.code),
        ),
      ).toBe(true);
      if (process.env['EO_DEBUG_OUTAGE'])
        console.log(worker.failed.map((f) => `${f.error.code}: ${f.error.message}`));
      const stats = consumer.stats();
      // A COMMIT whose answer was lost did commit: its redelivery is a duplicate, not processed.
      expect(stats.processed).toBeLessThanOrEqual(count);
      expect(stats.processed + stats.duplicates).toBeGreaterThanOrEqual(count);
      expect(stats.ackFailures).toBe(0);
    },
    TIMEOUT,
  );
});
