import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { HOST } from './ports.js';
import { postgresUser } from './postgres.js';
import { killProcess, run, spawnDetached, waitUntil } from './process.js';
import type { PgBouncerState } from './state.js';

/**
 * PgBouncer binary: EO_PGBOUNCER, `pgbouncer` on PATH, then Debian's /usr/sbin (not on
 * a non-root PATH). `bash .ci/run` installs Debian's package when it is missing.
 */
export async function findPgBouncer(): Promise<string> {
  const fromEnv = process.env['EO_PGBOUNCER'];
  if (fromEnv) {
    if (fs.existsSync(fromEnv)) return fromEnv;
    throw new Error(`EO_PGBOUNCER=${fromEnv} does not exist`);
  }
  const onPath = await run('which', ['pgbouncer']).then(
    (out) => out.trim(),
    () => '',
  );
  if (onPath) return onPath;
  if (fs.existsSync('/usr/sbin/pgbouncer')) return '/usr/sbin/pgbouncer';
  throw new Error('No pgbouncer binary (PATH, /usr/sbin): install pgbouncer or set EO_PGBOUNCER');
}

/** `pgbouncer --version`'s first line, e.g. `PgBouncer 1.18.0`. */
export async function pgBouncerVersion(binary: string): Promise<string> {
  return (await run(binary, ['--version'])).split('\n')[0]!.trim();
}

/**
 * The settings of a test PgBouncer in front of one Postgres. Transaction pooling, the
 * mode serverless platforms and most managed poolers run: a server connection belongs
 * to a client for one transaction only, so any session state the library left behind
 * would show up on another client's transaction.
 * - Any database name and any role pass through to the server (`*`); trust auth, the
 *   server trusts loopback too. A role missing from the userlist is looked up on the
 *   server with `auth_query` (as `auth_user`): test files log in as roles of their own
 *   (test/helpers/db.ts), which is how they get a `search_path` without the `options`
 *   startup parameter PgBouncer refuses.
 * - Server connections idle for 5 s are closed: each test file's role has a pool of its
 *   own, and idle ones would otherwise pile up against the server's `max_connections`.
 * - `extra_float_digits` is a startup parameter some drivers send; ignored, as
 *   production configurations do.
 */
function settings(opts: {
  port: number;
  serverHost: string;
  serverPort: number;
  user: string;
  dir: string;
}): string {
  return `; effectively-once test PgBouncer
[databases]
* = host=${opts.serverHost} port=${opts.serverPort}

[pgbouncer]
listen_addr = ${HOST}
listen_port = ${opts.port}
unix_socket_dir =
pool_mode = transaction
auth_type = trust
auth_file = ${path.join(opts.dir, 'userlist.txt')}
auth_user = ${opts.user}
admin_users = ${opts.user}
max_client_conn = 2000
default_pool_size = 60
max_db_connections = 200
server_idle_timeout = 5
ignore_startup_parameters = extra_float_digits
logfile = ${path.join(opts.dir, 'pgbouncer.log')}
pidfile = ${path.join(opts.dir, 'pgbouncer.pid')}
log_connections = 0
log_disconnections = 0
`;
}

/**
 * Writes `<root>/pgbouncer/pgbouncer.ini` for a PgBouncer on `port` in front of the
 * Postgres at `serverUrl`, starts it (as the `postgres` user when we are root: PgBouncer
 * refuses to run as root) and waits until a query goes through it.
 */
export async function createPgBouncer(
  root: string,
  port: number,
  serverUrl: string,
): Promise<PgBouncerState> {
  const [binary, runAs] = await Promise.all([findPgBouncer(), postgresUser()]);
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username) || 'postgres';
  const database = server.pathname.slice(1) || 'postgres';
  const dir = path.join(root, 'pgbouncer');
  fs.mkdirSync(dir, { recursive: true });
  const iniFile = path.join(dir, 'pgbouncer.ini');
  fs.writeFileSync(
    iniFile,
    settings({
      port,
      serverHost: server.hostname,
      serverPort: Number(server.port || 5432),
      user,
      dir,
    }),
  );
  // The auth_user must be in the file; everyone else is looked up through it.
  fs.writeFileSync(path.join(dir, 'userlist.txt'), `"${user}" ""\n`);
  if (runAs) {
    for (const entry of [dir, ...fs.readdirSync(dir).map((f) => path.join(dir, f))])
      fs.chownSync(entry, runAs.uid, runAs.gid);
  }
  const logFile = path.join(dir, 'pgbouncer.log');
  const state: PgBouncerState = {
    binary,
    pid: 0,
    port,
    iniFile,
    logFile,
    url: `postgres://${encodeURIComponent(user)}@${HOST}:${port}/${database}`,
    serverUrl,
    runAs,
  };
  await pgBouncerStart(state);
  return state;
}

/** Starts PgBouncer (in the foreground of a detached process, so its pid is ours to record). */
export async function pgBouncerStart(state: PgBouncerState): Promise<void> {
  state.pid = spawnDetached(state.binary, [state.iniFile], `${state.logFile}.out`, {
    runAs: state.runAs,
    cwd: path.dirname(state.iniFile),
  });
  await waitUntil(() => queries(state.url), {
    what: `PgBouncer on port ${state.port}`,
    timeoutMs: 20_000,
    logFile: state.logFile,
    pid: state.pid,
  });
}

/** SIGTERM is PgBouncer's immediate shutdown: clients are disconnected. */
export async function pgBouncerStop(state: PgBouncerState): Promise<void> {
  await killProcess(state.pid, 'SIGTERM', 5_000);
}

async function queries(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } finally {
    await client.end().catch(() => undefined);
  }
}
