import { BROKER_LABELS } from './broker.js';
import type { Report } from './report.js';
import type { ScenarioId } from './scenarios.js';

const SHORT: Record<ScenarioId, string> = {
  a: 'at-least-once worker',
  b: 'exactly-once, per message',
  c: 'exactly-once, batch mode',
  d: 'broker ceiling, no db',
  e: 'db ceiling, per message',
  f: 'inbox pattern',
  g: 'db ceiling, batches',
};

// This library's scenarios stand out; what users run today is warm; ceilings are grey.
const COLOR: Record<ScenarioId, string> = {
  a: '#e68c28',
  b: '#286ec8',
  c: '#1446a0',
  d: '#969696',
  e: '#969696',
  f: '#e68c28',
  g: '#969696',
};

const escape = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/**
 * msg/s per scenario of an empty-table run as an SVG bar chart (log scale, decade grid,
 * each bar's min–max over the rounds): text, so a new result is a readable diff.
 * Undefined when fewer than two scenarios ran.
 */
export function throughputChart(report: Report): string | undefined {
  const rows = report.summary.filter((s) => s.dedupPreload === 0 && s.throughput !== null);
  if (rows.length < 2) return undefined;
  const broker = BROKER_LABELS[report.options.broker];
  const title = `${broker}: msg/s per scenario (log scale), median of ${report.options.rounds} round(s)`;
  const [label, plot, rowH, top] = [240, 560, 30, 40];
  const width = label + plot + 90;
  const height = top + rows.length * rowH + 30;
  const lo = 2; // 100 msg/s
  const max = Math.max(...rows.map((r) => r.throughputMax ?? r.throughput ?? 1));
  const hi = Math.ceil(Math.log10(max * 1.05) * 2) / 2;
  const x = (v: number) => label + ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo)) * plot;
  const px = (v: number) => x(v).toFixed(1);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="13">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="10" y="22" font-size="15">${escape(title)}</text>`,
  ];
  for (let decade = lo; decade <= hi; decade++) {
    const text = decade >= 3 ? `${10 ** (decade - 3)}k` : `${10 ** decade}`;
    const y = top + rows.length * rowH;
    out.push(
      `<line x1="${px(10 ** decade)}" y1="${top - 4}" x2="${px(10 ** decade)}" y2="${y}" stroke="#e1e1e1"/>`,
      `<text x="${px(10 ** decade)}" y="${y + 18}" text-anchor="middle">${text}</text>`,
    );
  }
  rows.forEach((row, i) => {
    const y = top + i * rowH;
    const value = row.throughput as number;
    const mid = y + rowH / 2;
    out.push(
      `<text x="10" y="${mid + 4}">(${row.scenario}) ${SHORT[row.scenario]}</text>`,
      `<rect x="${label}" y="${y + 5}" width="${(x(value) - label).toFixed(1)}" height="${rowH - 10}" fill="${COLOR[row.scenario]}"/>`,
    );
    const [min, maxR] = [row.throughputMin, row.throughputMax];
    if (min !== null && maxR !== null) {
      out.push(
        `<path d="M${px(min)} ${mid - 5}v10M${px(min)} ${mid}H${px(maxR)}M${px(maxR)} ${mid - 5}v10" stroke="#3c3c3c" stroke-width="2" fill="none"/>`,
      );
    }
    const at = Math.max(x(value), x(maxR ?? value)) + 6;
    out.push(
      `<text x="${at.toFixed(1)}" y="${mid + 4}">${Math.round(value).toLocaleString('en-US')}</text>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
