import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { blocks, repoRoot } from '../../../scripts/readme-sync.js';

const readme = fs.readFileSync(path.join(repoRoot, 'README.md'), 'utf8');

describe('README.md', () => {
  const synced = blocks(readme);

  it('embeds the quick start and the adapter READMEs', () => {
    expect(synced.map((b) => b.file)).toEqual(
      expect.arrayContaining([
        'examples/quick-start.ts',
        'docs/sqs.md',
        'docs/kafka.md',
      ]),
    );
  });

  it.each(synced.map((b) => [b.file, b] as const))(
    'its copy of %s matches the file (run `npx tsx scripts/readme-sync.ts`)',
    (_file, block) => {
      // A file that does not exist (yet) leaves the README's own text in place.
      if (block.expected !== undefined) expect(block.current.trim()).toBe(block.expected.trim());
    },
  );

  it('has the sections users look for', () => {
    for (const heading of [
      '## The guarantee, and its limits',
      '## Two commands',
      '## Quick start',
      '## API',
      '## How it behaves when things fail',
      '## Choosing keys',
      '## Sizing the dedup window',
      '## How it compares',
      '## Troubleshooting',
      '## SQS adapter',
      '## Kafka adapter',
    ]) {
      expect(readme).toContain(`\n${heading}\n`);
    }
    expect(readme).toContain('npm ci && npm run demo');
  });

  it('documents every consumer option', () => {
    const options = fs.readFileSync(path.join(repoRoot, 'src', 'options.ts'), 'utf8');
    const names = [...options.matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1]);
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((name) => !new RegExp(`\\| \`${name}\` +\\|`).test(readme))).toEqual([]);
  });

  it('names no package registry host', () => {
    expect(readme).not.toMatch(/registry\.npmjs\.org|registry\.yarnpkg\.com|npmjs\.com/);
  });
});
