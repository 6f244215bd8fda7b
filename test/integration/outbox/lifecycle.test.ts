/**
 * A relay's start and stop (stop() during start() leaves nothing running), and the
 * names it builds its statements from.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createRelay, enqueue, migrateOutbox, type OutboxStats } from 'effectively-once/outbox';
import { quoteIdentifier } from '../../../src/store/identifiers.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('outbox_lifecycle');
  await migrateOutbox(db.pool, { schema: db.schema });
});

afterAll(async () => {
  await db.close();
});

/** Backends of this test's database LISTENing for the outbox. */
async function listeners(): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`,
  );
  return rows[0]!.n;
}

describe('relay.stop() during relay.start()', () => {
  it('leaves no timer, loop or LISTEN connection running once both resolved', async () => {
    const published: string[] = [];
    const relay = createRelay({
      pool: db.pool,
      schema: db.schema,
      publishers: {
        d: { publish: async (records) => void published.push(...records.map((r) => r.id)) },
      },
      lagIntervalMs: 100,
      pollIntervalMs: 50,
      retention: { olderThanMs: 1, intervalMs: 1000 },
    });
    const lags: OutboxStats[] = [];
    relay.on('lag', (s) => lags.push(s));
    // start() is still connecting its LISTEN connection when stop() is called.
    const starting = relay.start();
    const stopping = relay.stop();
    await Promise.all([starting, stopping]);
    await enqueue(db.pool, { destination: 'd', payload: 1 }, { schema: db.schema });
    await sleep(500);
    expect({ lags: lags.length, published }).toEqual({ lags: 0, published: [] });
    await waitFor(async () => (await listeners()) === 0, { what: 'no LISTEN connection' });
    await expect(relay.start()).rejects.toMatchObject({ code: 'EO_STATE' });
  }, 15_000);
});

describe('names from configuration', () => {
  it('claims from a schema whose name holds a backslash and a quote, with standard_conforming_strings off', async () => {
    const odd = await createTestDatabase('outbox_names', {
      options: '-c standard_conforming_strings=off',
    });
    const schema = `${odd.schema}\\x'y`;
    try {
      await migrateOutbox(odd.pool, { schema });
      const published: string[] = [];
      const relay = createRelay({
        pool: odd.pool,
        schema,
        publishers: {
          d: { publish: async (records) => void published.push(...records.map((r) => r.id)) },
        },
        listen: false,
        pollIntervalMs: 20,
      });
      const errors: unknown[] = [];
      relay.on('error', (e) => errors.push(e));
      const id = await enqueue(
        odd.pool,
        { destination: 'd', orderingKey: 'k', payload: 1 },
        { schema },
      );
      await relay.start();
      try {
        await waitFor(() => published.length === 1 || errors.length > 0, {
          what: 'a publish or an error',
        });
      } finally {
        await relay.stop();
      }
      expect({ errors: errors.map(String), published }).toEqual({ errors: [], published: [id] });
    } finally {
      await odd.pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`);
      await odd.close();
    }
  });
});
