/**
 * What the request side's data-layer matrix (test/integration/data-layers/matrix-http.ts)
 * stands on: a database of its own per test file, with the effects table the fixtures
 * write to, and endpoints served over real HTTP on loopback.
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { quoteIdentifier } from '../../../src/store/identifiers.js';
import { databaseUrl } from '../../helpers/db.js';
import { portOf } from '../../../kit/payments/payments.js';

/** A database created for one test file, dropped after it. */
export interface LayerDatabase {
  /** Its connection string. */
  readonly url: string;
  /** A pool on it: the library's own (housekeeping) pool, and the test's reads. */
  readonly pool: pg.Pool;
  /** Ends the pool and drops the database. */
  drop(): Promise<void>;
}

// The fixtures' effects table (see fixture.ts): a deferred constraint trigger refuses a
// negative amount at COMMIT, after every statement of the transaction succeeded.
const EFFECTS_SQL = `
CREATE TABLE layer_effects (id text PRIMARY KEY, door text NOT NULL, amount integer NOT NULL);
CREATE FUNCTION layer_effects_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.amount < 0 THEN
    RAISE EXCEPTION 'layer_effects: negative amount %', NEW.amount USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER layer_effects_not_negative AFTER INSERT OR UPDATE ON layer_effects
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION layer_effects_check();
`;

/** Creates a database named after `prefix` on the test server, with the effects table. */
export async function createLayerDatabase(prefix: string): Promise<LayerDatabase> {
  const name = `eo_${prefix.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: databaseUrl() });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${quoteIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(databaseUrl());
  url.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: url.toString(), max: 20 });
  // Backends the tests terminate on purpose surface here on idle clients.
  pool.on('error', () => undefined);
  await pool.query(EFFECTS_SQL);
  return {
    url: url.toString(),
    pool,
    drop: async () => {
      await pool.end();
      const admin = new pg.Client({ connectionString: databaseUrl() });
      await admin.connect();
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${quoteIdentifier(name)} WITH (FORCE)`);
      } finally {
        await admin.end();
      }
    },
  };
}

/** A server on loopback. */
export interface Served {
  readonly url: string;
  close(): Promise<void>;
}

/** Serves a node request listener (Express's app included) on 127.0.0.1. */
export async function serve(listener: http.RequestListener): Promise<Served> {
  const server = http.createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${portOf(server.address())}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A POST with a JSON body, and its answer read out. */
export async function post(
  url: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Headers; json: unknown }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: response.status, headers: response.headers, json };
}
