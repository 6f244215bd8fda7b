/**
 * The bench's `--data-layer` switch, in small: one round of the consumer bench (b) on
 * SQS, raw pg and Drizzle over postgres.js, against private services. It proves the
 * switch runs the layer's drain and checks it (every message's effect once, the report's
 * table row), not any figure: figures come from `npm run bench` on a quiet machine.
 */
import { describe, expect, it } from '@jest/globals';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { RunResult } from '../../../bench/protocol.js';
import { runHarness } from '../chaos/run-chaos.js';

describe('bench smoke: --data-layer', () => {
  it('drains (b) through raw pg and through the layer, each effect once, and tables the layer beside raw pg', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'eo-bench-layer-'));
    try {
      const run = await runHarness(
        'bench/main.ts',
        [
          '--broker',
          'sqs',
          '--messages',
          '200',
          '--rounds',
          '1',
          '--data-layer',
          'pg,drizzle-postgres-js',
          '--out',
          out,
        ],
        150_000,
      );
      expect({ code: run.code, stderr: run.stderr.slice(-4000) }).toEqual({
        code: 0,
        stderr: run.stderr.slice(-4000),
      });
      const report = JSON.parse(fs.readFileSync(path.join(out, 'latest-sqs.json'), 'utf8')) as {
        runs: RunResult[];
      };
      const drains = report.runs.map((r) => ({
        scenario: r.scenario,
        dataLayer: r.dataLayer ?? 'pg',
        rows: r.effects.rows,
        distinct: r.effects.distinct,
        problems: r.problems,
      }));
      expect(drains).toEqual([
        { scenario: 'b', dataLayer: 'pg', rows: 200, distinct: 200, problems: [] },
        { scenario: 'b', dataLayer: 'drizzle-postgres-js', rows: 200, distinct: 200, problems: [] },
      ]);
      const markdown = fs.readFileSync(path.join(out, 'latest-sqs.md'), 'utf8');
      expect(markdown).toMatch(/^\| drizzle-postgres-js \| [\d,.]+ \| \d+\.\d\d \| .* \| ok \|$/m);
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  }, 180_000);
});
