/**
 * `tsx bench/render.ts .cache/runs/bench/latest-sqs.json [...] [--to bench/results]`:
 * rewrites the markdown table and the SVG chart of each run's JSON report from the JSON
 * alone, so their format can change without re-running the bench. Next to the JSON by
 * default; `--to bench/results` publishes them where the docs cite them (the JSON stays
 * in the run directory: kit/results.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PUBLISHED_DIR } from '../kit/results.js';
import { throughputChart } from './chart.js';
import { renderMarkdown, type Report } from './report.js';

const { values, positionals: files } = parseArgs({
  options: { to: { type: 'string' } },
  allowPositionals: true,
});
if (files.length === 0) {
  console.error(`usage: tsx bench/render.ts <latest-*.json>... [--to ${PUBLISHED_DIR}]`);
  process.exit(2);
}
for (const file of files) {
  const report = JSON.parse(fs.readFileSync(file, 'utf8')) as Report;
  const base = path.join(values.to ?? path.dirname(file), path.basename(file, '.json'));
  fs.mkdirSync(path.dirname(base), { recursive: true });
  fs.writeFileSync(`${base}.md`, renderMarkdown(report));
  console.log(`wrote ${base}.md`);
  const chart = throughputChart(report);
  if (chart !== undefined) {
    fs.writeFileSync(`${base}.svg`, chart);
    console.log(`wrote ${base}.svg`);
  }
}
