/**
 * EO_VIA_PGBOUNCER=1 (jest.config.js runs this directory only then): the tests'
 * database really is PgBouncer in transaction mode, so the consumer, HTTP and outbox
 * files .ci/run sends through it prove something about the pooler, not about a direct
 * connection that merely looks like one.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('pgbouncer_routing');
});
afterAll(async () => db.close());

describe('the tests through PgBouncer', () => {
  it('reach Postgres through PgBouncer, whose key data is its own, not the backend pid', async () => {
    expect(databaseUrl()).toBe(process.env['PGBOUNCER_URL']);
    const client = new pg.Client({ connectionString: databaseUrl() });
    await client.connect();
    try {
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const keyPid = (client as unknown as { processID: number }).processID;
      expect(rows[0]!.pid).not.toBe(keyPid);
    } finally {
      await client.end();
    }
  });

  it('pool in transaction mode (PgBouncer admin console)', async () => {
    const admin = new URL(databaseUrl());
    admin.pathname = '/pgbouncer';
    const client = new pg.Client({ connectionString: admin.toString() });
    await client.connect();
    try {
      const { rows } = await client.query<{ key: string; value: string }>('SHOW CONFIG');
      expect(rows.find((r) => r.key === 'pool_mode')?.value).toBe('transaction');
    } finally {
      await client.end();
    }
  });

  it("give each test file's pool its schema as search_path without a startup option", async () => {
    await db.pool.query('CREATE TABLE here (n int)');
    const { rows } = await db.pool.query<{ schema: string }>(
      "SELECT table_schema AS schema FROM information_schema.tables WHERE table_name = 'here'",
    );
    expect(rows.map((r) => r.schema)).toEqual([db.schema]);
  });
});
