import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { repoRoot } from '../examples/support.js';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** What one run of the bin printed, and how it ended. */
export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * `npm run build` into a directory of its own under .cache/, so this file runs the
 * bin exactly as built while the package test (which deletes and rebuilds dist/ to pack
 * it) may run at the same time. Inside the repo, `pg` and `"type": "module"` resolve as
 * they do from dist/.
 */
export async function buildCli(): Promise<{ main: string; remove: () => void }> {
  const out = path.join(repoRoot, '.cache', `cli-build-${randomBytes(4).toString('hex')}`);
  await promisify(execFile)(npm, ['run', 'build', '--', '--outDir', out], { cwd: repoRoot });
  const main = path.join(out, 'src', 'cli', 'main.js');
  if (!fs.existsSync(main)) throw new Error(`npm run build made no ${main}`);
  return { main, remove: () => fs.rmSync(out, { recursive: true, force: true }) };
}

/** Starts `node <main> ...args`; `env` replaces the environment's DATABASE_URL when given. */
export function startCli(main: string, args: string[], env: NodeJS.ProcessEnv = process.env) {
  const child = spawn(process.execPath, [main, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const done = new Promise<CliRun>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child: child as ChildProcess, done };
}

/** Runs the bin to its end. */
export function runCli(main: string, args: string[], env?: NodeJS.ProcessEnv): Promise<CliRun> {
  return startCli(main, args, env).done;
}

/**
 * One test file's bin and database: built and created before its tests, removed after
 * them (`beforeClose` first, for what still uses the database).
 */
export function cliFixture(
  prefix: string,
  beforeClose: () => Promise<void> = async () => undefined,
): () => { main: string; db: TestDatabase } {
  let built: { main: string; remove: () => void } | undefined;
  let db: TestDatabase | undefined;
  beforeAll(async () => {
    built = await buildCli();
    db = await createTestDatabase(prefix);
  }, 180_000);
  afterAll(async () => {
    await beforeClose();
    await db?.close();
    built?.remove();
  });
  return () => {
    if (built === undefined || db === undefined) throw new Error('no bin or database yet');
    return { main: built.main, db };
  };
}

/** A run's stdout as a JSON document, once its stderr is checked to be empty. */
export function jsonOf(run: CliRun): Record<string, unknown> {
  expect(run.stderr).toBe('');
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

/** Runs the fixture's bin on its schema; `table` goes with `tableFlag` (`--table` …). */
export function runOnSchema(
  fixture: () => { main: string; db: TestDatabase },
  tableFlag: string,
): (args: string[], table?: string) => Promise<CliRun> {
  return (args, table) => {
    const { main, db } = fixture();
    return runCli(main, [
      ...args,
      '--schema',
      db.schema,
      ...(table === undefined ? [] : [tableFlag, table]),
    ]);
  };
}
