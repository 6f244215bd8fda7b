import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { repoRoot } from './examples/support.js';

const run = promisify(execFile);
const here = path.join(repoRoot, 'test', 'integration', 'package');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

interface Manifest {
  exports: Record<string, string | Record<string, string>>;
  bin: Record<string, string>;
}

let work: string;
let tarball: string;
let files: string[];

/**
 * Package hygiene, end to end: build, pack, inspect the tarball, install it into a
 * scratch project, import every entry point with plain Node, type-check a
 * consumer of its declarations, and compare its surface with the API reports.
 */
beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'eo-package-'));
  // Only what `files` packs is rebuilt, so stale output cannot sneak into the tarball.
  for (const dir of ['dist/src', 'dist/adapters'])
    fs.rmSync(path.join(repoRoot, dir), { recursive: true, force: true });
  await run(npm, ['run', 'build'], { cwd: repoRoot });
  // Built just above; prepack's own build would print into the JSON on stdout.
  const { stdout } = await run(
    npm,
    ['pack', '--ignore-scripts', '--json', '--pack-destination', work],
    {
      cwd: repoRoot,
    },
  );
  const [packed] = JSON.parse(stdout) as Array<{
    filename: string;
    files: Array<{ path: string }>;
  }>;
  if (!packed) throw new Error(`npm pack printed no result: ${stdout}`);
  tarball = path.join(work, packed.filename);
  files = packed.files.map((f) => f.path).sort();
}, 180_000);

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

describe('the packed package', () => {
  it('contains only the build output (src + adapters), README.md and package.json', () => {
    const allowed = /^(dist\/(src|adapters)\/.+\.(js|d\.ts)|README\.md|package\.json|LICENSE)$/;
    expect(files.filter((f) => !allowed.test(f))).toEqual([]);
    expect(files).toEqual(expect.arrayContaining(['README.md', 'package.json']));
    expect(files.filter((f) => /\.test\.|\/test\/|\/examples\//.test(f))).toEqual([]);
    const manifest = JSON.parse(
      fs.readFileSync(path.join(repoRoot, 'package.json'), 'utf8'),
    ) as Manifest;
    const targets = Object.values(manifest.exports).flatMap((t) =>
      typeof t === 'string' ? [t] : Object.values(t),
    );
    expect(targets.map((t) => t.replace(/^\.\//, '')).filter((t) => !files.includes(t))).toEqual(
      [],
    );
    // The CLI's bin is packed, with the shebang npm's bin links need.
    expect(manifest.bin).toEqual({ 'effectively-once': 'dist/src/cli/main.js' });
    expect(files).toContain('dist/src/cli/main.js');
    expect(fs.readFileSync(path.join(repoRoot, 'dist/src/cli/main.js'), 'utf8')).toMatch(
      /^#!\/usr\/bin\/env node\n/,
    );
    for (const entry of [
      '.',
      './sqs',
      './kafka',
      './kafka/platformatic',
      './testing',
      './client',
      './http',
      './http/express',
      './http/fastify',
      './outbox',
      './otel',
      './typeorm',
      './kysely',
      './rabbitmq',
      './prisma',
      './drizzle',
      './postgres-js',
      './knex',
      './lambda',
      './nestjs',
    ]) {
      expect(manifest.exports[entry]).toMatchObject({
        types: expect.stringMatching(/\.d\.ts$/),
        default: expect.stringMatching(/\.js$/),
      });
    }
  });

  describe('installed into a scratch project', () => {
    let scratch: string;

    beforeAll(async () => {
      scratch = path.join(work, 'scratch');
      fs.mkdirSync(scratch);
      fs.writeFileSync(
        path.join(scratch, 'package.json'),
        JSON.stringify({ name: 'scratch', private: true, type: 'module' }),
      );
      const install = [
        'install',
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        '--legacy-peer-deps',
        tarball,
      ];
      // The tarball's own dependencies come from npm's cache (filled by `npm ci`); the
      // registry is asked only if the cache lacks them.
      await run(npm, [...install, '--offline'], { cwd: scratch }).catch(() =>
        run(npm, [...install, '--prefer-offline'], { cwd: scratch }),
      );
      // Peer dependencies (and the types a TypeScript user installs): the repo's copies.
      for (const peer of [
        'pg',
        'kafkajs',
        '@aws-sdk/client-sqs',
        'express',
        'fastify',
        '@types/pg',
        '@types/node',
        '@types/express',
        '@opentelemetry/api',
        'kysely',
        'drizzle-orm',
        '@types/aws-lambda',
        '@middy/core',
        'amqplib',
        // effectively-once/nestjs loads Nest at run time (its decorators, the builder).
        '@nestjs/common',
        '@nestjs/core',
        'reflect-metadata',
        'rxjs',
      ]) {
        const link = path.join(scratch, 'node_modules', peer);
        fs.mkdirSync(path.dirname(link), { recursive: true });
        fs.symlinkSync(path.join(repoRoot, 'node_modules', peer), link, 'dir');
      }
      for (const file of ['smoke.js', 'check.ts'])
        fs.copyFileSync(path.join(here, file), path.join(scratch, file));
    }, 180_000);

    it('imports every entry point with plain Node (ESM); runs a consumer and an idempotent endpoint against Postgres, idempotentFetch against a loopback server', async () => {
      const { stdout } = await run(process.execPath, ['smoke.js'], {
        cwd: scratch,
        env: process.env,
      });
      expect(stdout).toContain('package smoke test: ok');
    }, 60_000);

    it('links the bin: `effectively-once` runs from node_modules/.bin', async () => {
      const bin = path.join(scratch, 'node_modules', '.bin', 'effectively-once');
      const help = await run(bin, ['--help'], { cwd: scratch });
      expect(help.stdout).toContain('Usage: effectively-once <command> [options]');
      const { DATABASE_URL: _, ...env } = process.env;
      const printed = await run(bin, ['migrate', '--print', '--all', '--only', 'consumer'], {
        cwd: scratch,
        env,
      });
      expect(printed.stdout).toContain(
        'CREATE TABLE IF NOT EXISTS "public"."processed_messages" (',
      );
    }, 60_000);

    it('type-checks a consumer of the declarations with tsc (strict, NodeNext, skipLibCheck off)', async () => {
      fs.writeFileSync(
        path.join(scratch, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            target: 'ES2022',
            lib: ['ES2022'],
            module: 'NodeNext',
            moduleResolution: 'NodeNext',
            strict: true,
            noEmit: true,
            skipLibCheck: false,
            types: ['node'],
          },
          files: ['check.ts'],
        }),
      );
      const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
      const result = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], {
        cwd: scratch,
      }).catch((error: Error & { stdout?: string }) => ({ stdout: error.stdout || error.message }));
      expect(result.stdout).toBe('');
    }, 120_000);
  });

  it('publishes the surface its API reports (etc/*.api.md) record, every export with JSDoc', async () => {
    // The build above is what API Extractor reads; `npm run api:report` updates the reports.
    const result = await run(
      process.execPath,
      ['--import', 'tsx', path.join(repoRoot, 'scripts', 'api-report.ts')],
      { cwd: repoRoot },
    ).then(
      ({ stdout }) => ({ code: 0, stdout }),
      (error: Error & { code?: number; stdout?: string }) => ({
        code: error.code ?? 1,
        stdout: error.stdout ?? error.message,
      }),
    );
    // On failure the output names each stale report and each problem.
    expect(result.stdout).not.toContain('FAILED');
    expect(result.code).toBe(0);
  }, 120_000);
});
