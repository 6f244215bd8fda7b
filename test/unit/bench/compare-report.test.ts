import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { repoRoot } from '../../../scripts/docs-sync.js';
import { effectivelyOnceFailures, markdownTable } from '../../../bench/compare/report.js';
import type { ContenderResult, Tally } from '../../../bench/compare/scenario.js';

const clean = (payments: number): Tally => ({
  payments,
  doubles: 0,
  stuck: 0,
  lost: 0,
  unanswered: 0,
});

function result(overrides: Partial<ContenderResult> = {}): ContenderResult {
  return {
    contender: 'effectively-once',
    kills: 20,
    killed: clean(20),
    dropped: clean(20),
    plain: clean(60),
    oneProcess: { requests: 20, charges: 1, answered2xx: 20 },
    twoProcesses: { requests: 20, charges: 1, answered2xx: 20 },
    seconds: 1,
    ...overrides,
  };
}

// The gate `npm run compare` exits 1 on: what makes a run of effectively-once not clean.
describe('npm run compare: the verdict on effectively-once', () => {
  it('passes a clean run', () => {
    expect(effectivelyOnceFailures(result())).toEqual([]);
  });

  it.each([
    ['a double', { killed: { ...clean(20), doubles: 1 } }, /killed payments: 1 doubles/],
    [
      'a stuck key',
      { dropped: { ...clean(20), stuck: 1 } },
      /dropped payments: 0 doubles, 1 stuck/,
    ],
    ['an answer without a charge', { plain: { ...clean(60), lost: 1 } }, /1 answered without/],
    ['a kill that never happened', { kills: 19 }, /19 of 20 armed kills/],
    [
      'two charges from concurrent duplicates',
      { twoProcesses: { requests: 20, charges: 2, answered2xx: 20 } },
      /two processes: 2 charges/,
    ],
    [
      'a concurrent duplicate never answered',
      { oneProcess: { requests: 20, charges: 1, answered2xx: 19 } },
      /one process: 1 charge, 19\/20/,
    ],
  ])('fails on %s', (_name, overrides, message) => {
    const failures = effectivelyOnceFailures(result(overrides));
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatch(message);
  });

  it('prints what it measured, one row per contender', () => {
    const table = markdownTable(
      [
        result(),
        result({
          contender: 'express-idempotency/memory',
          killed: { ...clean(20), doubles: 20 },
          twoProcesses: { requests: 20, charges: 2, answered2xx: 20 },
        }),
      ],
      { 'effectively-once': '0.1.0', 'express-idempotency': '1.0.6' },
      20,
    );
    const rows = table.split('\n');
    expect(rows).toHaveLength(4);
    expect(rows[2]).toContain('| effectively-once/http/express 0.1.0 |');
    expect(rows[3]).toMatch(
      /^\| express-idempotency 1\.0\.6 \| in-memory .* \| 20 \| 0 \| 0 \| 0 \| 1 charge, 20\/20 answered 2xx \| 2 charges, 20\/20 answered 2xx \|$/,
    );
  });
});

/** A markdown table's rows as trimmed cells (prettier pads the copy in the docs). */
function rows(markdown: string): string[][] {
  return markdown
    .split('\n')
    .filter((line) => line.startsWith('|') && !/^\|[-:| ]+\|$/.test(line))
    .map((line) => line.split('|').map((cell) => cell.trim()));
}

describe('docs/comparison.md', () => {
  it.each(['compare-http', 'compare-consumer'])(
    'holds the table the last `npm run compare` wrote to bench/results/%s.md, not one typed by hand',
    (name) => {
      const read = (file: string): string => fs.readFileSync(path.join(repoRoot, file), 'utf8');
      const measured = rows(read(`bench/results/${name}.md`));
      expect(measured.length).toBeGreaterThan(2);
      const documented = rows(read('docs/comparison.md'));
      for (const row of measured) expect(documented).toContainEqual(row);
    },
  );
});
