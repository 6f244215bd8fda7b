/**
 * The two read-only nodes every door is tested against: a real hot standby behind the
 * failover proxy, and a server whose sessions start read-only (a demoted primary
 * behind a pooler). Shared by the consumer's, the HTTP door's and the relay's tests.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { FailoverCluster } from '../../../kit/services/cluster/cluster.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { waitFor } from '../../helpers/wait-for.js';
import { schemaOn, startCluster } from './support.js';

export interface ReadOnlyNode {
  /** The consumer's pool and schema (dedup and charges tables migrated while writable). */
  db: TestDatabase;
  makeReadOnly(): Promise<void>;
  makeWritable(): Promise<void>;
  close(): Promise<void>;
}

/** A real hot standby: the primary dies, the proxy points at the standby, later it is promoted. */
export async function hotStandby(): Promise<ReadOnlyNode> {
  const cluster: FailoverCluster = await startCluster('sync');
  const db = await schemaOn(cluster.url, 'read_only_standby');
  return {
    db,
    makeReadOnly: async () => {
      const standby = await cluster.standbyReady();
      await cluster.crashPrimary('kill');
      await poolEmptied(db.pool);
      cluster.proxy.retarget(standby.state.port);
    },
    // Promotion cuts the proxy's connections and points it at the promoted node.
    makeWritable: async () => void (await cluster.promoteStandby()),
    close: async () => {
      await db.close();
      await cluster.stop();
    },
  };
}

/**
 * The shared test server, reached as a role whose sessions start read-only. Making it
 * writable again cuts nothing: connections opened while it was read-only stay so, and
 * the library must drop them rather than keep retrying on them.
 */
export async function readOnlyRole(): Promise<ReadOnlyNode> {
  const admin = await createTestDatabase('read_only_role');
  const role = `eo_ro_${randomBytes(4).toString('hex')}`;
  await admin.pool.query(`CREATE ROLE ${role} LOGIN SUPERUSER`);
  const url = new URL(databaseUrl());
  url.username = role;
  url.password = '';
  const pool = new pg.Pool({
    connectionString: url.toString(),
    max: 10,
    options: `-c search_path=${admin.schema}`,
  });
  pool.on('error', () => undefined);
  return {
    db: { ...admin, pool },
    // As when a primary is demoted: its sessions end, new ones start read-only.
    makeReadOnly: async () => {
      await admin.pool.query(`ALTER ROLE ${role} SET default_transaction_read_only = on`);
      await admin.pool.query(
        'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1',
        [role],
      );
      await poolEmptied(pool);
    },
    makeWritable: async () => {
      await admin.pool.query(`ALTER ROLE ${role} RESET default_transaction_read_only`);
    },
    close: async () => {
      await pool.end();
      await admin.close();
      await admin.pool.query(`DROP ROLE IF EXISTS ${role}`).catch(() => undefined);
    },
  };
}

/** Waits until the pool has let go of every connection (their sessions ended). */
export async function poolEmptied(pool: pg.Pool): Promise<void> {
  await waitFor(() => pool.totalCount === 0, { what: 'the old sessions gone from the pool' });
}

export const readOnlyNodes: Record<string, () => Promise<ReadOnlyNode>> = {
  'a hot standby': hotStandby,
  'a server with default_transaction_read_only': readOnlyRole,
};
