/**
 * README.md embeds files so they cannot drift from it: a block
 *
 *   <!-- sync:examples/quick-start.ts -->  …  <!-- /sync -->
 *
 * holds that file (a `.ts` file as a fenced block; a `.md` file without its title and
 * with its headings one level deeper, so an adapter's README becomes a section).
 * `npx tsx scripts/readme-sync.ts [files…]` rewrites the blocks (of README.md, or of the
 * markdown files named); test/unit/docs/*.test.ts fail when one is stale. A block whose file does not exist keeps its text.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const BLOCK = /(<!-- sync:([^\s]+) -->\n)([\s\S]*?)(<!-- \/sync -->)/g;

/** One synced block of the README. */
export interface SyncBlock {
  file: string;
  current: string;
  /** What the block should hold, or undefined when the file does not exist. */
  expected: string | undefined;
  /** Whether `current` is `expected`, blank lines around it aside. */
  fresh: boolean;
}

/** What a block holds for `file`. */
export function render(file: string, text: string): string {
  if (file.endsWith('.md')) return markdownSection(text);
  const lang = path.extname(file).slice(1);
  return `\`\`\`${lang}\n${text.endsWith('\n') ? text : `${text}\n`}\`\`\`\n`;
}

/** Drops the title, demotes every heading one level (outside code fences). */
function markdownSection(text: string): string {
  const lines = text.split('\n');
  if (lines[0]?.startsWith('# ')) lines.shift();
  while (lines[0]?.trim() === '') lines.shift();
  let fenced = false;
  const out = lines.map((line) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    return !fenced && /^#{1,5} /.test(line) ? `#${line}` : line;
  });
  const body = out.join('\n').trimEnd();
  return `${body}\n`;
}

export function blocks(readme: string, root = repoRoot): SyncBlock[] {
  return [...readme.matchAll(BLOCK)].map((m) => {
    const file = m[2] ?? '';
    const full = path.join(root, file);
    const current = m[3] ?? '';
    const expected = fs.existsSync(full) ? render(file, fs.readFileSync(full, 'utf8')) : undefined;
    return {
      file,
      current,
      expected,
      fresh: expected === undefined || expected.trim() === current.trim(),
    };
  });
}

export function sync(readme: string, root = repoRoot): string {
  return readme.replace(
    BLOCK,
    (whole, open: string, file: string, current: string, close: string) => {
      const full = path.join(root, file);
      // Blank lines around the content, as prettier formats markdown.
      const text = fs.existsSync(full)
        ? `\n${render(file, fs.readFileSync(full, 'utf8'))}\n`
        : current;
      return `${open}${text}${close}`;
    },
  );
}

if (
  process.argv[1] !== undefined &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
) {
  // `npx tsx scripts/readme-sync.ts [docs/http.md …]`: README.md when no file is named.
  const files = process.argv.length > 2 ? process.argv.slice(2) : ['README.md'];
  for (const name of files) {
    const file = path.resolve(repoRoot, name);
    const before = fs.readFileSync(file, 'utf8');
    const after = sync(before);
    fs.writeFileSync(file, after);
    const stale = blocks(before).filter((b) => !b.fresh);
    console.log(
      stale.length
        ? `${name}: synced ${stale.map((b) => b.file).join(', ')}`
        : `${name}: up to date`,
    );
  }
}
