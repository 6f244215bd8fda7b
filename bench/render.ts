/**
 * `tsx bench/render.ts bench/results/latest-sqs.json [...]`: rewrites the markdown and
 * the SVG chart next to each JSON report from the JSON alone, so their format can
 * change without re-running the bench.
 */
import fs from 'node:fs';
import { throughputChart } from './chart.js';
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
  const chart = throughputChart(report);
  if (chart !== undefined) {
    fs.writeFileSync(file.replace(/\.json$/, '.svg'), chart);
    console.log(`wrote ${file.replace(/\.json$/, '.svg')}`);
  }
}
