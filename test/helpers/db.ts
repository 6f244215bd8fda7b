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

/**
 * EO_VIA_PGBOUNCER=1: the tests reach Postgres through PgBouncer in transaction mode
 * (global setup starts it, kit/services/pgbouncer.ts), so the files that build on
 * {@link databaseUrl} and {@link createTestDatabase} run through it unchanged.
 */
export function viaPgBouncer(): boolean {
  return process.env['EO_VIA_PGBOUNCER'] === '1';
}

function required(name: string): string {
  const url = process.env[name];
  if (!url)
    throw new Error(
      `${name} is not set: run the tests through jest (global setup starts ${name === 'PGBOUNCER_URL' ? 'PgBouncer' : 'Postgres'})`,
    );
  return url;
}

/** The database the integration tests use: PgBouncer's with EO_VIA_PGBOUNCER=1, else Postgres's. */
export function databaseUrl(): string {
  return viaPgBouncer() ? required('PGBOUNCER_URL') : required('DATABASE_URL');
}

/** The test Postgres itself, never through PgBouncer (set-up the pooler cannot carry). */
export function directDatabaseUrl(): string {
  return required('DATABASE_URL');
}

/**
 * Creates a schema named after the test file plus random bytes and a pool whose
 * connections use it as `search_path`, so unqualified names land in it. On the test
 * database, or on `poolOptions.connectionString` (a server of the test's own).
 *
 * Through PgBouncer the `options` startup parameter that sets `search_path` is refused,
 * and a session-level `SET` would not outlive the transaction: the pool logs in as a
 * role of the schema's name (a superuser, as the direct tests' `postgres`) whose own
 * `search_path` is the schema, set with `ALTER ROLE` on the server.
 */
export async function createTestDatabase(
  prefix: string,
  poolOptions: pg.PoolConfig = {},
): Promise<TestDatabase> {
  const schema = `t_${prefix.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  const bounced = viaPgBouncer() && poolOptions.connectionString === undefined;
  const admin = new pg.Client({
    connectionString:
      poolOptions.connectionString ?? (bounced ? directDatabaseUrl() : databaseUrl()),
  });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
  if (bounced) {
    await admin.query(`CREATE ROLE ${quoteIdentifier(schema)} LOGIN SUPERUSER`);
    await admin.query(
      `ALTER ROLE ${quoteIdentifier(schema)} SET search_path = ${quoteIdentifier(schema)}`,
    );
  }
  await admin.end();
  const pool = new pg.Pool({
    connectionString: bounced ? asUser(databaseUrl(), schema) : databaseUrl(),
    max: 30,
    ...(bounced ? {} : { options: `-c search_path=${schema}` }),
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
      if (bounced) await dropRole(schema);
    },
  };
}

/** The URL with another user (pg takes the connection string's user over a `user` option). */
function asUser(url: string, user: string): string {
  const parsed = new URL(url);
  parsed.username = encodeURIComponent(user);
  parsed.password = '';
  return parsed.toString();
}

/** The schema's role, on the server (PgBouncer may still hold an idle session of it: ended first). */
async function dropRole(role: string): Promise<void> {
  const admin = new pg.Client({ connectionString: directDatabaseUrl() });
  await admin.connect();
  try {
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [
      role,
    ]);
    await admin.query(`DROP OWNED BY ${quoteIdentifier(role)}`).catch(() => undefined);
    await admin.query(`DROP ROLE IF EXISTS ${quoteIdentifier(role)}`).catch(() => undefined);
  } finally {
    await admin.end();
  }
}
