/**
 * Issue 11: the new `acquireTimeoutMs` option bounds `pool.connect()` for a claim; past
 * it the delivery is retried later without spending an attempt (a starved pool says
 * nothing about the message). (Needs the new option: does not typecheck before the fix.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import type { EffectivelyOnceError } from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { databaseUrl } from '../../helpers/env.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('acquire_timeout');
});
afterAll(async () => db.close());

describe('acquireTimeoutMs', () => {
  it('a claim that cannot get a connection in time is retried without spending an attempt', async () => {
    const pool = new pg.Pool({
      connectionString: databaseUrl(),
      options: `-c search_path=${db.schema}`,
      max: 2,
    });
    pool.on('error', () => undefined);
    const held: pg.PoolClient[] = [];
    const failures: Array<{ error: EffectivelyOnceError; willRetry: boolean }> = [];
    const h = await memoryHarness(db, {
      pool,
      concurrency: 1,
      maxAttempts: 1,
      acquireTimeoutMs: 300,
    });
    h.consumer.on('failed', (f) => failures.push(f));
    try {
      await h.consumer.start();
      // Another part of the app holds every connection of the pool.
      held.push(await pool.connect(), await pool.connect());
      const message = h.source.send({ id: 'starved', amount: 1 }, { key: 'starved' });
      await waitFor(() => failures.length >= 1, {
        timeoutMs: 15_000,
        what: 'claims failing to get a connection',
      });
      expect(failures.every((f) => f.willRetry)).toBe(true);
      expect(failures.every((f) => f.error.retryable)).toBe(true);
      expect(message.state).not.toBe('dead-lettered');

      held.splice(0).forEach((c) => c.release());
      await waitFor(() => message.state === 'acked' || message.state === 'dead-lettered', {
        timeoutMs: 30_000,
        what: 'settled once the pool has room',
      });
      expect(message.state).toBe('acked');
      expect(message.outcomes.at(-1)).toBe('processed');
      expect(message.outcomes.slice(0, -1).every((o) => o === 'retry')).toBe(true);
      expect(await h.effects()).toEqual([{ id: 'starved', amount: 1 }]);
    } finally {
      held.splice(0).forEach((c) => c.release());
      await h.consumer.stop({ timeoutMs: 2000 });
      await pool.end();
    }
  });
});
