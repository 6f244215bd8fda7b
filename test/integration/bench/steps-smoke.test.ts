/**
 * `npm run bench -- --http --steps` in small: one 3-second round of each mode, after a
 * 1-second warm-up, (the
 * three-step flow and the same work in one in-transaction handler) against the test
 * provider, on the test Postgres (fsync off: `--no-fsync`), the library from source (no
 * build in a test). It proves the bench runs and checks its own work (every answer a
 * 201, one order per answer, each with its charge); the figures are the lead's quiet
 * runs', not this one's.
 */
import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StepsModeRun } from '../../../bench/http/steps-report.js';
import { databaseUrl } from '../../helpers/env.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

function bench(args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/main.ts', ...args], {
    cwd: repoRoot,
    env: { ...process.env, DATABASE_URL: databaseUrl() },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, output }));
  });
}

describe('npm run bench -- --http --steps (smoke)', () => {
  it('runs both modes in one run, each answering 201 with one charged order per answer', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'eo-bench-steps-'));
    try {
      const run = await bench([
        '--http',
        '--steps',
        '--no-fsync',
        '--from-source',
        '--duration',
        '3',
        '--warmup',
        '1',
        '--rounds',
        '1',
        '--connections',
        '4',
        '--pool',
        '4',
        '--out',
        out,
      ]);
      expect({ code: run.code, output: run.output }).toEqual({ code: 0, output: run.output });
      const report = JSON.parse(
        fs.readFileSync(path.join(out, 'latest-http-steps-no-fsync.json'), 'utf8'),
      ) as { runs: StepsModeRun[]; summary: { throughputRatio: number | null } };
      expect(report.runs.map((r) => r.mode).sort()).toEqual(['steps', 'tx']);
      for (const r of report.runs) {
        expect(r.problems).toEqual([]);
        expect(r.requests).toBeGreaterThan(0);
      }
      expect(report.summary.throughputRatio).not.toBeNull();
      expect(fs.readFileSync(path.join(out, 'latest-http-steps-no-fsync.md'), 'utf8')).toMatch(
        /the cost per step/,
      );
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});
