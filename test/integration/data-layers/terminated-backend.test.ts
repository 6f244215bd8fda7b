/**
 * Every bridge survives a backend terminated in the middle of its transaction (the
 * library ends an abandoned handler's backend with pg_terminate_backend on every handler
 * timeout): the process lives on, with no `error` listener of the user's on the layer's
 * connections, and the next transaction on a pool of one works. Each layer runs in a
 * child process (terminated-child.ts), since an unhandled `error` event ends a process.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLayerDatabase, type LayerDatabase } from './matrix-consumer.js';

const CHILD = fileURLToPath(new URL('./terminated-child.ts', import.meta.url));

/** Runs the child for `layer`; its exit code, what it printed, and its stderr (a crash's). */
function runChild(
  url: string,
  layer: string,
): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, url, layer], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out, err })));
}

describe('a backend terminated mid-transaction', () => {
  let db: LayerDatabase;
  beforeAll(async () => {
    db = await createLayerDatabase('terminated');
  });
  afterAll(async () => {
    await db?.close();
  });

  it.each(['kysely', 'drizzle-pg', 'knex', 'typeorm', 'prisma', 'postgres-js'])(
    '%s: the process survives and the next transaction works',
    async (layer) => {
      const { code, out, err } = await runChild(db.url, layer);
      // The child's own lines (Knex logs the lost connection on stdout and lives on);
      // stderr only when it failed.
      const said = out.split('\n').filter((line) => /^(terminated|next): /.test(line));
      expect({ code, said, err: code === 0 ? '' : err }).toEqual({
        code: 0,
        said: ['terminated: rejected', 'next: 1'],
        err: '',
      });
    },
    60_000,
  );
});
