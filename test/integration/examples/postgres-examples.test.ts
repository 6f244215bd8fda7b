/**
 * The examples the docs quote that need only Postgres: each runs against a database of
 * its own, as a user would run it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { migrateKeyTable } from '../../../src/http/index.js';
import { createConsumer, migrate } from '../../../src/index.js';
import { memorySource } from '../../../src/testing/index.js';
import { main as customSource } from '../../../examples/custom-source.js';
import { main as paymentsApi } from '../../../examples/http-payments.js';
import {
  createTables as createOutboxTables,
  paymentsRelay,
  placeOrder,
  type OrderPlaced,
} from '../../../examples/outbox.js';
import { main as pruneJob } from '../../../examples/prune-job.js';
import { main as testingHandlers } from '../../../examples/testing-handlers.js';
import { waitFor } from '../../helpers/wait-for.js';
import { createExampleDatabase, repoRoot, type ExampleDatabase } from './support.js';

async function withDatabase(prefix: string, run: (db: ExampleDatabase) => Promise<void>) {
  const db = await createExampleDatabase(prefix);
  try {
    await run(db);
  } finally {
    await db.drop();
  }
}

const env = (db: ExampleDatabase) => ({ ...process.env, DATABASE_URL: db.url });

describe('Postgres-only examples quoted by the docs', () => {
  it('testing-handlers.ts: its checks pass (one deposit, two duplicates)', async () => {
    await withDatabase('testing', async (db) => {
      await testingHandlers({ env: env(db) });
      const { rows } = await db.pool.query<{ cents: string }>('SELECT cents FROM balances');
      expect(rows).toEqual([{ cents: '500' }]);
    });
  });

  it('outbox.ts: an order delivered twice is charged once at the payment API, even when the relay sends the charge twice', async () => {
    await withDatabase('outbox', async (db) => {
      await createOutboxTables(db.pool);
      // The external API: examples/http-payments.ts, in its own database.
      const api = await createExampleDatabase('outbox_api');
      const stopApi = new AbortController();
      let apiUrl = '';
      let listening: () => void = () => undefined;
      const ready = new Promise<void>((resolve) => (listening = resolve));
      const apiDone = paymentsApi({
        signal: stopApi.signal,
        env: { DATABASE_URL: api.url, PORT: '0' },
        onListening: (url) => {
          apiUrl = url;
          listening();
        },
      });
      try {
        await ready;
        const source = memorySource<OrderPlaced>();
        const consumer = createConsumer({
          name: 'orders',
          pool: db.pool,
          source,
          handler: placeOrder,
        });
        await consumer.start();
        const order = { orderId: 'o-1', customerId: 'cus_1', totalCents: 990 };
        source.loseNextAcks(1);
        source.send(order, { key: 'order-1' });
        source.send(order, { key: 'order-1' });
        while (source.outstanding > 0) await new Promise((r) => setTimeout(r, 10));
        await consumer.stop();

        const relay = paymentsRelay(db.pool, apiUrl);
        let published = 0;
        relay.on('published', () => published++);
        await relay.start();
        try {
          await waitFor(() => published === 1, { what: 'the charge sent' });
          // As if the relay had died after the call and before its mark: sent again.
          await db.pool.query("UPDATE eo_outbox SET state = 'pending'");
          relay.wake();
          await waitFor(() => published === 2, { what: 'the charge sent again' });
        } finally {
          await relay.stop();
        }
        const outbox = await db.pool.query<{ id: string }>('SELECT id FROM eo_outbox');
        expect(outbox.rows).toHaveLength(1);
        const charges = await api.pool.query(
          'SELECT tenant, customer_id, amount_cents FROM charges',
        );
        expect(charges.rows).toEqual([
          { tenant: 'shop', customer_id: 'cus_1', amount_cents: '990' },
        ]);
        const keys = await api.pool.query('SELECT idempotency_key FROM eo_idempotency_keys');
        expect(keys.rows).toEqual([{ idempotency_key: outbox.rows[0]!.id }]);
      } finally {
        stopApi.abort();
        await apiDone;
        await api.drop();
      }
    });
  });

  it('custom-source.ts: the resend is a duplicate, the undecodable job a dead letter', async () => {
    await withDatabase('custom_source', async (db) => {
      const result = await customSource({ env: env(db) });
      expect([...result.done].sort()).toEqual(['j1', 'j2']);
      expect(result.deadLetters).toEqual(['j3']);
      expect(result.stats).toMatchObject({ processed: 1, duplicates: 1, deadLettered: 1 });
      const { rows } = await db.pool.query('SELECT text FROM notes');
      expect(rows).toEqual([{ text: 'hello' }]);
    });
  });

  it("prune-job.ts: deletes the orders consumer's keys older than 14 days, nothing else", async () => {
    await withDatabase('prune_job', async (db) => {
      await migrate(db.pool);
      await db.pool.query(`
        INSERT INTO processed_messages (consumer, message_key, processed_at) VALUES
          ('orders', 'old-1', now() - interval '20 days'),
          ('orders', 'old-2', now() - interval '15 days'),
          ('orders', 'new-1', now() - interval '1 day'),
          ('invoices', 'old-3', now() - interval '20 days')`);
      expect(await pruneJob({ env: env(db) })).toBe(2);
      const { rows } = await db.pool.query<{ message_key: string }>(
        'SELECT message_key FROM processed_messages ORDER BY message_key',
      );
      expect(rows.map((r) => r.message_key)).toEqual(['new-1', 'old-3']);
    });
  });

  it('sql/dedup-table.sql: the same table and index as migrate() creates', async () => {
    await withDatabase('sql_schema', async (db) => {
      const ddl = fs.readFileSync(path.join(repoRoot, 'examples/sql/dedup-table.sql'), 'utf8');
      await migrate(db.pool, { schema: 'by_migrate' });
      await db.pool.query('CREATE SCHEMA by_sql');
      const client = await db.pool.connect();
      try {
        await client.query('SET search_path = by_sql');
        await client.query(ddl);
      } finally {
        await client.query('RESET search_path');
        client.release();
      }
      const shape = async (schema: string) => {
        const columns = await db.pool.query(
          `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
            WHERE table_schema = $1 AND table_name = 'processed_messages' ORDER BY ordinal_position`,
          [schema],
        );
        const indexes = await db.pool.query<{ indexdef: string }>(
          `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'processed_messages' ORDER BY indexname`,
          [schema],
        );
        return {
          columns: columns.rows,
          indexes: indexes.rows.map((r) => r.indexdef.replaceAll(`${schema}.`, '')),
        };
      };
      const expected = await shape('by_migrate');
      expect(expected.columns).toHaveLength(5);
      expect(await shape('by_sql')).toEqual(expected);
    });
  });

  it('sql/idempotency-keys-table.sql: the same table, index and functions as migrateKeyTable() creates', async () => {
    await withDatabase('sql_http_keys', async (db) => {
      const ddl = fs.readFileSync(
        path.join(repoRoot, 'examples/sql/idempotency-keys-table.sql'),
        'utf8',
      );
      await migrateKeyTable(db.pool, { schema: 'by_migrate' });
      await db.pool.query(ddl); // in public, as the file says
      const shape = async (schema: string) => {
        const columns = await db.pool.query(
          `SELECT column_name, data_type, is_nullable, column_default FROM information_schema.columns
            WHERE table_schema = $1 AND table_name = 'eo_idempotency_keys' ORDER BY ordinal_position`,
          [schema],
        );
        const constraints = await db.pool.query<{ def: string }>(
          `SELECT pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
             JOIN pg_namespace n ON n.oid = c.connamespace JOIN pg_class r ON r.oid = c.conrelid
            WHERE n.nspname = $1 AND r.relname = 'eo_idempotency_keys' ORDER BY 1`,
          [schema],
        );
        const indexes = await db.pool.query<{ indexdef: string }>(
          `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'eo_idempotency_keys' ORDER BY indexname`,
          [schema],
        );
        const functions = await db.pool.query<{ def: string }>(
          `SELECT pg_get_functiondef(p.oid) AS def FROM pg_proc p
             JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1 ORDER BY p.proname`,
          [schema],
        );
        const local = (text: string) =>
          text.replaceAll(`"${schema}".`, '').replaceAll(`${schema}.`, '');
        return {
          columns: columns.rows,
          constraints: constraints.rows.map((r) => r.def),
          indexes: indexes.rows.map((r) => local(r.indexdef)),
          functions: functions.rows.map((r) => local(r.def)),
        };
      };
      const expected = await shape('by_migrate');
      expect(expected.columns).toHaveLength(11);
      expect(expected.functions).toHaveLength(2);
      expect(await shape('public')).toEqual(expected);
    });
  });

  it('sql/claim-holders.sql: runs, and lists a transaction open for more than 5 seconds', async () => {
    await withDatabase('sql_holders', async (db) => {
      const query = fs.readFileSync(path.join(repoRoot, 'examples/sql/claim-holders.sql'), 'utf8');
      const holder = await db.pool.connect();
      try {
        // A transaction left open for 6 s ('idle in transaction'): a stuck handler's.
        await holder.query('BEGIN');
        await holder.query('SELECT pg_sleep(6)');
        const { rows } = await db.pool.query<{ pid: number; query: string }>(query);
        expect(rows.map((r) => r.query)).toContain('SELECT pg_sleep(6)');
      } finally {
        await holder.query('ROLLBACK');
        holder.release();
      }
    });
  }, 30_000);
});
