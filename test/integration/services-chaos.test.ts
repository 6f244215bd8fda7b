/**
 * Self-test of the chaos helpers (restartPostgres, stopKafka/startKafka...).
 * Restarting a shared service breaks every other test file running at the
 * same time, so jest.config.js leaves it out unless EO_CHAOS=1, and .ci/run runs it
 * alone as its own step:
 *   EO_CHAOS=1 npm run test:integration -- --testPathPatterns services-chaos
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, test } from '@jest/globals';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { databaseUrl, kafkaBrokers } from '../helpers/env.js';
import {
  restartKafka,
  restartPostgres,
  servicesState,
  startKafka,
  startPostgres,
  stopKafka,
  stopPostgres,
} from '../../kit/services/index.js';

const TIMEOUT = 120_000;

async function withClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: databaseUrl() });
  client.on('error', () => {}); // a restart ends the connection; the query reports it
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => {});
  }
}

describe('chaos helpers', () => {
  test(
    'a committed row survives a Postgres crash; clients see the outage',
    async () => {
      const table = `chaos_${randomUUID().replaceAll('-', '')}`;
      await withClient(async (c) => {
        await c.query(`create table ${table} (x int)`);
        await c.query(`insert into ${table} values (1)`);
        await restartPostgres({ mode: 'immediate' });
        await expect(c.query('select 1')).rejects.toThrow();
      });

      await stopPostgres();
      await expect(withClient((c) => c.query('select 1'))).rejects.toThrow();
      await startPostgres();

      const rows = await withClient((c) => c.query(`select count(*)::int as n from ${table}`));
      expect(rows.rows).toEqual([{ n: 1 }]);
    },
    TIMEOUT,
  );

  test(
    'Kafka keeps its topics across a crash and a clean restart',
    async () => {
      const kafka = new Kafka({ brokers: kafkaBrokers(), logLevel: logLevel.NOTHING });
      const topic = `chaos-${randomUUID()}`;
      const admin = kafka.admin();
      await admin.connect();
      await admin.createTopics({ topics: [{ topic }], waitForLeaders: true });
      await admin.disconnect();

      const before = servicesState()?.kafka?.pid;
      await stopKafka({ signal: 'SIGKILL' });
      await startKafka();
      expect(servicesState()?.kafka?.pid).not.toBe(before);
      await restartKafka();

      const again = kafka.admin();
      await again.connect();
      try {
        expect(await again.listTopics()).toContain(topic);
      } finally {
        await again.disconnect();
      }
    },
    TIMEOUT,
  );
});
