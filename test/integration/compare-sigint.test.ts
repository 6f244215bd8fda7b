import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { describe, expect, it } from '@jest/globals';

/** Pids of the processes whose environment holds `marker` (this run's descendants). */
function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/environ`, 'utf8').includes(marker))
        pids.push(Number(entry));
    } catch {
      // Gone meanwhile, or not ours to read.
    }
  }
  return pids;
}

// A Ctrl-C on `npm run compare` must take its payment servers and its private Postgres
// down with it: before, they lived on after the runner died.
describe('npm run compare: SIGINT', () => {
  it('stops the servers and the private Postgres, then exits 130', async () => {
    const marker = `EO_COMPARE_SIGINT_${process.pid}_${Date.now()}`;
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'compare-sigint-')), 'r');
    const env: NodeJS.ProcessEnv = { ...process.env, [marker]: '1' };
    // A private Postgres, started and owned by the runner.
    for (const name of ['DATABASE_URL', 'EO_SERVICES_STATE', 'EO_SERVICES']) delete env[name];
    const runner = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'bench/compare/main.ts',
        '--contenders',
        'effectively-once',
        '--payments',
        '1000',
        '--out',
        out,
      ],
      { env, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      runner.once('exit', (code, signal) => resolve({ code, signal })),
    );
    // The first progress line: Postgres is up and a payment server is running.
    const lines = createInterface({ input: runner.stderr });
    const logged = (pattern: RegExp): Promise<void> =>
      new Promise<void>((resolve, reject) => {
        lines.on('line', (line) => {
          if (pattern.test(line)) resolve();
        });
        void exited.then(() => reject(new Error(`the runner exited before logging ${pattern}`)));
      });
    await logged(/effectively-once: 20\/1000 payments/);
    expect(processesWith(marker).length).toBeGreaterThan(1);

    // A Ctrl-C under `npm run compare` reaches the runner twice: from the terminal (its
    // process group) and relayed by tsx. The second must not cut the cleanup short.
    const stopping = logged(/SIGINT: stopping/);
    runner.kill('SIGINT');
    await stopping;
    runner.kill('SIGINT');
    const t0 = Date.now();
    await expect(exited).resolves.toEqual({ code: 130, signal: null });
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(processesWith(marker)).toEqual([]);
  });
});
