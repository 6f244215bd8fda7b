import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { databaseUrl } from '../../helpers/env.js';
import { EFFECTS_TABLE } from './fixture.js';

// A database of its own for one bridge test file, with the effects table the fixtures
// write to (fixture.ts): a layer's pool connects to the database's URL as users do, with
// no search_path of the test's to pass through each layer's own options.

/** The effects table, and a trigger deferred to COMMIT that refuses a negative amount. */
const EFFECTS_DDL = `
CREATE TABLE ${EFFECTS_TABLE} (id text PRIMARY KEY, door text NOT NULL, amount integer NOT NULL);
CREATE FUNCTION ${EFFECTS_TABLE}_refuse_negative() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.amount < 0 THEN
    RAISE EXCEPTION 'negative amount %', NEW.amount USING ERRCODE = 'check_violation';
  END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER ${EFFECTS_TABLE}_amount AFTER INSERT OR UPDATE ON ${EFFECTS_TABLE}
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ${EFFECTS_TABLE}_refuse_negative();
`;

/** One bridge test file's database. */
export interface BridgeDatabase {
  readonly url: string;
  /** The test's own connections: to check what committed, to end a layer's backend. */
  readonly admin: pg.Pool;
  /** The effects committed under `door`, by id (its `door/` prefix left out). */
  effects(door: string): Promise<{ id: string; amount: number }[]>;
  /** Ends the backend `pid` (pg_terminate_backend) and waits until it is gone. */
  terminate(pid: number): Promise<void>;
  drop(): Promise<void>;
}

export async function createBridgeDatabase(prefix: string): Promise<BridgeDatabase> {
  const name = `bridge_${prefix}_${randomBytes(4).toString('hex')}`;
  const root = new pg.Client({ connectionString: databaseUrl() });
  await root.connect();
  await root.query(`CREATE DATABASE ${name}`);
  await root.end();
  const url = new URL(databaseUrl());
  url.pathname = `/${name}`;
  const admin = new pg.Pool({ connectionString: url.toString(), max: 3 });
  admin.on('error', () => undefined);
  await admin.query(EFFECTS_DDL);
  return {
    url: url.toString(),
    admin,
    effects: async (door) =>
      (
        await admin.query<{ id: string; amount: number }>(
          `SELECT substr(id, length(door) + 2) AS id, amount FROM ${EFFECTS_TABLE}
            WHERE door = $1 ORDER BY id`,
          [door],
        )
      ).rows,
    terminate: async (pid) => {
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      for (;;) {
        const { rows } = await admin.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1',
          [pid],
        );
        if (rows[0]!.n === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    },
    drop: async () => {
      await admin.end();
      const client = new pg.Client({ connectionString: databaseUrl() });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}
