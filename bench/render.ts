/**
 * `tsx bench/render.ts bench/results/latest-sqs.json [...]`: rewrites the markdown next
 * to each JSON report from the JSON alone, so the table's format can change without
 * re-running the bench.
 */
import fs from 'node:fs';
import { renderMarkdown, type Report } from './report.js';

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: tsx bench/render.ts <latest-*.json>...');
  process.exit(2);
}
for (const file of files) {
  const report = JSON.parse(fs.readFileSync(file, 'utf8')) as Report;
  const target = file.replace(/\.json$/, '.md');
  fs.writeFileSync(target, renderMarkdown(report));
  console.log(`wrote ${target}`);
}
