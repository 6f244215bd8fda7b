import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';

/** A pool bound to a fresh schema, so test files can run in parallel without seeing each other. */
export interface TestDatabase {
  pool: pg.Pool;
  schema: string;
  /** `"schema"."name"`, for the test's own effect tables. */
  table(name: string): string;
  /** Drops the schema and closes the pool. */
  close(): Promise<void>;
}

/** The database the integration tests use; set by the global setup or by the caller. */
export function databaseUrl(): string {
  const url = process.env.DATABASE_URL;
  if (!url)
    throw new Error(
      'DATABASE_URL is not set: run the tests through jest (global setup starts Postgres)',
    );
  return url;
}

/**
 * Creates a schema named after the test file plus random bytes and a pool whose
 * connections use it as `search_path`, so unqualified names land in it. On the test
 * database, or on `poolOptions.connectionString` (a server of the test's own).
 */
export async function createTestDatabase(
  prefix: string,
  poolOptions: pg.PoolConfig = {},
): Promise<TestDatabase> {
  const schema = `t_${prefix.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: poolOptions.connectionString ?? databaseUrl() });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
  await admin.end();
  const pool = new pg.Pool({
    connectionString: databaseUrl(),
    max: 30,
    options: `-c search_path=${schema}`,
    ...poolOptions,
  });
  // Terminated backends (tests kill some on purpose) surface here on idle clients.
  pool.on('error', () => undefined);
  return {
    pool,
    schema,
    table: (name) => `${quoteIdentifier(schema)}.${quoteIdentifier(name)}`,
    close: async () => {
      await pool
        .query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`)
        .catch(() => undefined);
      await pool.end();
    },
  };
}
