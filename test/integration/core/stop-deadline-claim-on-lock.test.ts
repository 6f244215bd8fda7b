import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createConsumer } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor, within } from '../../helpers/wait-for.js';

// stop({ timeoutMs }) promises to resolve by its deadline. A claim waiting on a key
// another instance holds (its handler still running) waits up to `lockTimeoutMs`
// (allowed up to an hour); the runners give up on it at the hard stop
// (`conn.untilHardStop`, src/consumer/runner.ts, batch-runner.ts), so stop() must not
// overshoot its deadline by lockTimeoutMs, per message or in batch mode.

describe('stop() deadline with a claim waiting on a key held by another instance', () => {
  let db: TestDatabase;
  let other: pg.Client;
  beforeAll(async () => {
    db = await createTestDatabase('stop_claim_on_lock');
    other = new pg.Client({
      connectionString: databaseUrl(),
      options: `-c search_path=${db.schema}`,
    });
    await other.connect();
  });
  afterAll(async () => {
    await other.query('ROLLBACK').catch(() => undefined);
    await other.end();
    await db.close();
  });

  it.each([
    ['per message', {}],
    ['batch mode', { batch: { maxSize: 10, maxWaitMs: 20 } }],
  ])('%s: stop({ timeoutMs: 1000 }) resolves by its deadline', async (mode, extra) => {
    const source = memorySource<{ n: number }>();
    const consumer = createConsumer<{ n: number }>({
      name: `pay-${mode.replace(' ', '-')}`,
      source,
      ...extra,
      pool: db.pool,
      schema: db.schema,
      lockTimeoutMs: 30_000,
      handler: async () => undefined,
    });
    await consumer.start(); // migrates the table
    // Another instance claimed k1 and is still running its handler.
    await other.query('BEGIN');
    await other.query(
      `INSERT INTO processed_messages (consumer, message_key, expires_at) VALUES ($1, 'k1', 'infinity')`,
      [`pay-${mode.replace(' ', '-')}`],
    );
    source.send({ n: 1 }, { key: 'k1' });
    await waitFor(
      async () =>
        (
          await db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO%' AND query LIKE $1`,
            [`%${db.schema}%`],
          )
        ).rowCount! > 0,
      { what: 'claim waiting on the key lock' },
    );
    const result = await within(
      consumer.stop({ timeoutMs: 1000 }).then(() => 'stopped' as const),
      8000,
    );
    await other.query('ROLLBACK');
    await consumer.stop();
    expect(result).toBe('stopped');
  });
});
