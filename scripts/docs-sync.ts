/**
 * README.md and docs/*.md show code only as copies of files that are type-checked and
 * run (examples/), so the docs cannot drift from them. A block
 *
 *   <!-- sync:examples/quick-start.ts -->  …  <!-- /sync -->
 *
 * holds the whole file as a fenced block, and
 *
 *   <!-- sync:examples/batch-worker.ts#handler -->  …  <!-- /sync -->
 *
 * the lines between `// #region handler` and `// #endregion` in it, dedented.
 *
 *   npx tsx scripts/docs-sync.ts          rewrites the blocks (`npm run docs:sync`)
 *   npx tsx scripts/docs-sync.ts --check  lists stale blocks and exits 1
 *
 * test/unit/docs/docs.test.ts fails on a stale block, a missing file or region, and a
 * code block in the docs that is not synced.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const BLOCK = /(<!-- sync:([^\s#]+)(?:#([\w-]+))? -->\n)([\s\S]*?)(<!-- \/sync -->)/g;

/** One synced block of a markdown file. */
export interface SyncBlock {
  /** The embedded file, relative to the repo root. */
  file: string;
  /** The region of it, or undefined for the whole file. */
  region: string | undefined;
  /** What the block holds now, blank lines around it aside. */
  current: string;
  /** What it should hold, or an error saying why it cannot be made. */
  expected: { text: string } | { error: string };
  /** Whether `current` is what it should be. */
  fresh: boolean;
}

/** The markdown files whose blocks are synced: README.md and every docs/*.md. */
export function docFiles(root = repoRoot): string[] {
  const docs = fs.existsSync(path.join(root, 'docs'))
    ? fs
        .readdirSync(path.join(root, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .sort()
        .map((f) => `docs/${f}`)
    : [];
  return ['README.md', ...docs];
}

/** Lines of `text` between `// #region name` and the next `// #endregion`, dedented. */
export function regionOf(text: string, name: string): string | undefined {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.trim() === `// #region ${name}`);
  if (start < 0) return undefined;
  const length = lines.slice(start + 1).findIndex((l) => l.trim().startsWith('// #endregion'));
  if (length < 0) return undefined;
  const body = lines.slice(start + 1, start + 1 + length);
  const indent = Math.min(
    ...body.filter((l) => l.trim() !== '').map((l) => l.length - l.trimStart().length),
  );
  return body.map((l) => l.slice(indent)).join('\n');
}

/** What a block should hold for `file` (and `region`), as a fenced block. */
export function render(
  file: string,
  region: string | undefined,
  root = repoRoot,
): SyncBlock['expected'] {
  const full = path.join(root, file);
  if (!fs.existsSync(full)) return { error: `${file} does not exist` };
  let text = fs.readFileSync(full, 'utf8');
  if (region !== undefined) {
    const part = regionOf(text, region);
    if (part === undefined) return { error: `${file} has no region "${region}"` };
    text = part;
  }
  // Region markers inside a whole-file copy are noise to a reader.
  if (region === undefined) text = text.replace(/^[ \t]*\/\/ #(end)?region\b.*\n/gm, '');
  const lang = path.extname(file).slice(1);
  return { text: `\`\`\`${lang}\n${text.trimEnd()}\n\`\`\`\n` };
}

/** The synced blocks of one markdown text. */
export function blocks(markdown: string, root = repoRoot): SyncBlock[] {
  return [...markdown.matchAll(BLOCK)].map((m) => {
    const file = m[2] ?? '';
    const region = m[3];
    const current = m[4] ?? '';
    const expected = render(file, region, root);
    return {
      file,
      region,
      current,
      expected,
      fresh: 'text' in expected && expected.text.trim() === current.trim(),
    };
  });
}

/** The markdown with every block rewritten (a block that cannot be made keeps its text). */
export function sync(markdown: string, root = repoRoot): string {
  return markdown.replace(
    BLOCK,
    (whole, open: string, file: string, region: string | undefined, current: string, close) => {
      const expected = render(file, region, root);
      // Blank lines around the content, as prettier formats markdown.
      return `${open}${'text' in expected ? `\n${expected.text}\n` : current}${String(close)}`;
    },
  );
}

if (
  process.argv[1] !== undefined &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
) {
  const check = process.argv.includes('--check');
  let [stale, broken] = [0, 0];
  for (const doc of docFiles()) {
    const full = path.join(repoRoot, doc);
    const before = fs.readFileSync(full, 'utf8');
    for (const b of blocks(before).filter((x) => !x.fresh)) {
      const what = `${b.file}${b.region === undefined ? '' : `#${b.region}`}`;
      if ('error' in b.expected) broken++;
      else stale++;
      const problem = 'error' in b.expected ? b.expected.error : `stale copy of ${what}`;
      console.log(`${doc}: ${problem}${check || 'error' in b.expected ? '' : ' (rewritten)'}`);
    }
    if (!check) fs.writeFileSync(full, sync(before));
  }
  if (broken > 0 || (check && stale > 0)) {
    if (check && stale > 0) console.log('run `npm run docs:sync` and commit the result');
    process.exitCode = 1;
  } else if (stale === 0) console.log('docs: every synced block is up to date');
}
