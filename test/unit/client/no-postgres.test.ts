import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { repoRoot } from '../../../scripts/docs-sync.js';

/** Every module `entry` imports, transitively (relative imports followed, packages listed). */
function importGraph(entry: string): { files: string[]; packages: string[] } {
  const files = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (files.has(file)) return;
    files.add(file);
    const source = fs.readFileSync(file, 'utf8');
    for (const m of source.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'/g)) {
      const spec = m[1] ?? '';
      if (spec.startsWith('.'))
        visit(path.resolve(path.dirname(file), spec.replace(/\.js$/, '.ts')));
      else packages.add(spec);
    }
  };
  visit(path.join(repoRoot, entry));
  return { files: [...files], packages: [...packages] };
}

describe('effectively-once/client', () => {
  const graph = importGraph('src/client/index.ts');

  it('imports no package at all (no pg, nothing Node-only): it runs wherever fetch does', () => {
    expect(graph.files.length).toBeGreaterThan(3);
    expect(graph.packages).toEqual([]);
  });

  it('stays out of the consumer core', () => {
    const outside = graph.files
      .map((f) => path.relative(repoRoot, f))
      .filter((f) => !f.startsWith('src/client/'));
    expect(outside.sort()).toEqual([
      'src/errors.ts',
      'src/option-checks.ts',
      'src/signals.ts',
      'src/sleep.ts',
      'src/store/pg-errors.ts', // SQLSTATE helpers for the error classes; imports nothing
    ]);
  });
});
