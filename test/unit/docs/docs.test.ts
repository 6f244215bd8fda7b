import fs from 'node:fs';
import path from 'node:path';
import type { PoolClient } from 'pg';
import { describe, expect, it } from '@jest/globals';
import { blocks, docFiles, repoRoot } from '../../../scripts/docs-sync.js';
import { ClaimStatements } from '../../../src/store/claim.js';
import { pgClaimSession } from '../../../src/tx/claim-connection.js';

const read = (file: string) => fs.readFileSync(path.join(repoRoot, file), 'utf8');
const readme = read('README.md');
const docs = docFiles();
/** Every markdown file a reader of the repo lands on. */
const pages = [...docs, 'ARCHITECTURE.md', 'CHANGELOG.md'];

/** Markdown without its fenced blocks and code spans, where links are not links. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's heading anchors of a markdown file. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading = ''] of markdown
    .replace(/^```[\s\S]*?^```/gm, '')
    .matchAll(/^#{1,6} (.+)$/gm)) {
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

describe('README.md and docs/', () => {
  it.each(docs)('%s: every synced code block matches its file in examples/', (doc) => {
    const stale = blocks(read(doc))
      .filter((b) => !b.fresh)
      .map((b) => ('error' in b.expected ? b.expected.error : `stale: ${b.file}#${b.region}`));
    // `npm run docs:sync` rewrites stale blocks.
    expect(stale).toEqual([]);
  });

  it.each(docs)('%s: shows code only as synced copies of examples/ (or sh/console/text)', (doc) => {
    const text = read(doc).replace(/<!-- sync:[^\n]+ -->\n[\s\S]*?<!-- \/sync -->/g, '');
    const fences = [...text.matchAll(/^ *```(\S*)/gm)].map((m) => m[1]);
    // Opening and closing fences alternate: every other match opens a block.
    const languages = fences.filter((_, i) => i % 2 === 0);
    expect(languages.filter((l) => !['sh', 'console', 'text'].includes(l ?? ''))).toEqual([]);
  });

  it.each(pages)('%s: relative links reach a file, and a heading where they name one', (page) => {
    const broken: string[] = [];
    for (const [, target = ''] of prose(read(page)).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [file = '', anchor] = target.split('#');
      const resolved = file === '' ? page : path.join(path.dirname(page), file);
      if (!fs.existsSync(path.join(repoRoot, resolved))) broken.push(target);
      else if (anchor !== undefined && resolved.endsWith('.md')) {
        if (!anchors(read(resolved)).has(anchor)) broken.push(target);
      }
    }
    expect(broken).toEqual([]);
  });

  it('the README is a pitch and a path: short, with the sections a new user looks for', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
    for (const heading of [
      '## The guarantee, and its limits',
      '## Install',
      '## Quick start',
      '## Two commands',
      '## Documentation',
    ]) {
      expect(readme).toContain(`\n${heading}\n`);
    }
    expect(readme).toContain('npm ci && npm run demo');
    expect(readme).toContain('\nnpm test ');
    expect(blocks(readme).map((b) => b.file)).toContain('examples/quick-start.ts');
    // Every docs page is on the README's map.
    const unlinked = docs
      .filter((d) => d.startsWith('docs/'))
      .filter((d) => !readme.includes(`](${d})`));
    expect(unlinked).toEqual([]);
  });

  it("the README's diagram shows the SQL the runner sends for a claim", async () => {
    const sent: string[] = [];
    const client = {
      query: async (sql: string) => {
        sent.push(sql);
        return [{}, {}, {}, { command: 'INSERT', rowCount: 1 }, { rows: [{ xid: '7' }] }];
      },
    } as unknown as PoolClient;
    const claims = new ClaimStatements(
      { schema: 'public', table: 'processed_messages' },
      undefined,
    );
    await claims.begin(pgClaimSession(client), '<name>', '<key>', Buffer.alloc(32, 7), 5000);
    const [sql = ''] = sent;
    const shown = readme.replace(/\s+/g, ' ');
    const statements = sql
      .replace(/"public"\."processed_messages"/g, 'processed_messages')
      .replace(/'<(name|key)>'/g, '<$1>')
      .replace(/decode\('[0-9a-f]+', 'hex'\)/, '<sha256>')
      .replace("'infinity'", '<expiry>')
      .replace(/\b5000\b/, '<lockTimeoutMs>')
      .split(/;\s*/)
      .filter((s) => s !== '')
      .map((s) => `${s.replace(/\s+/g, ' ').trim()};`);
    expect(statements.length).toBeGreaterThan(1);
    // Update the diagram in README.md when the claim's SQL changes.
    expect(statements.filter((s) => !shown.includes(s))).toEqual([]);
    expect(shown).toContain('SELECT payload_hash');
  });

  it('documents every option of createConsumer (the shared ones too), sqsSource and kafkaSource', () => {
    const options = (file: string, iface: string): string[] => {
      const source = read(file);
      const start = source.indexOf(`export interface ${iface}`);
      const body = source.slice(start, source.indexOf('\n}', start));
      return [...body.matchAll(/^ {2}(\w+)\??:/gm)].map((m) => m[1] ?? '');
    };
    for (const [doc, file, iface] of [
      ['docs/api.md', 'src/consumer/options.ts', 'ConsumerOptions'],
      ['docs/sqs.md', 'adapters/sqs/options.ts', 'SqsSourceOptions'],
      ['docs/kafka.md', 'adapters/kafka/options.ts', 'KafkaSourceOptions'],
    ] as const) {
      const names = options(file, iface);
      if (iface === 'ConsumerOptions')
        for (const shared of ['StoreOptions', 'TransactionOptions'])
          names.push(...options('src/shared-options.ts', shared));
      expect(names.length).toBeGreaterThan(10);
      const text = read(doc);
      expect(names.filter((name) => !text.includes(`- **\`${name}\`**`))).toEqual([]);
    }
  });

  it('names no package registry host', () => {
    for (const page of pages) {
      expect(read(page)).not.toMatch(/registry\.npmjs\.org|registry\.yarnpkg\.com|npmjs\.com/);
    }
  });
});
