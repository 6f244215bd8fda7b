/**
 * A backend ended under a client the library holds out of the app's pool is an error
 * for the holder, never an unhandled `error` event (which ends the process: the
 * `server_crashes=1` of the HTTP-through-a-layer and steps chaos runs at a Postgres
 * restart). Each scenario runs in a child process (held-client-child.ts) that must
 * survive it.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, directDatabaseUrl, type TestDatabase } from '../../helpers/db.js';

const CHILD = fileURLToPath(new URL('./held-client-child.ts', import.meta.url));

function runChild(
  url: string,
  scenario: string,
): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, url, scenario], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out, err })));
}

/** The test database's URL with the schema as search_path, for the child's own pool. */
function schemaUrl(schema: string): string {
  const url = new URL(directDatabaseUrl());
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.toString();
}

describe('a backend terminated under a client the library holds', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('held_client');
  });
  afterAll(async () => {
    await db?.close();
  });

  it.each([
    ['acquire', 'rejected'],
    ['steps', 'retry'],
  ])(
    '%s: the process survives, the holder is told, the pool serves on',
    async (scenario, held) => {
      const { code, out, err } = await runChild(schemaUrl(db.schema), scenario);
      const said = out.split('\n').filter((line) => /^(held|next): /.test(line));
      expect({ code, said, err: code === 0 ? '' : err }).toEqual({
        code: 0,
        said: [`held: ${held}`, 'next: 1'],
        err: '',
      });
    },
    60_000,
  );
});
