import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { blocks, repoRoot } from '../../../scripts/readme-sync.js';

// scripts/readme-sync.ts rewrites README.md only (for now); its blocks() reads any
// markdown, so docs/client.md's synced example is held to the same rule here.
const doc = fs.readFileSync(path.join(repoRoot, 'docs', 'client.md'), 'utf8');

describe('docs/client.md', () => {
  const synced = blocks(doc);

  it('embeds the runnable example', () => {
    expect(synced.map((b) => b.file)).toEqual(['examples/client-retry.ts']);
  });

  it.each(synced.map((b) => [b.file, b] as const))(
    'its copy of %s matches the file',
    (_f, block) => {
      expect(block.expected).toBeDefined();
      expect(block.current.trim()).toBe(block.expected?.trim());
    },
  );

  it('documents every option of idempotentFetch', () => {
    const source = fs.readFileSync(path.join(repoRoot, 'src', 'client', 'options.ts'), 'utf8');
    const body = /export interface IdempotentFetchOptions \{([\s\S]*?)\n\}/.exec(source)?.[1] ?? '';
    const names = [...body.matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1]);
    expect(names.length).toBeGreaterThan(8);
    expect(names.filter((name) => !new RegExp(`\\| \`${name}\` +\\|`).test(doc))).toEqual([]);
  });

  it('names every error code the client raises', () => {
    for (const code of ['EO_CONFIGURATION', 'EO_UNREPLAYABLE_BODY', 'EO_RETRIES_EXHAUSTED'])
      expect(doc).toContain(code);
  });
});
