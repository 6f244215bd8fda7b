import type { ScenarioId } from '../scenarios.js';
import type { ScenarioSummary } from '../summary.js';
import { drawText, textWidth } from './font.js';
import { encodePng, Raster, type Rgb } from './png.js';

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
const COLOR: Record<ScenarioId, Rgb> = {
  a: [230, 140, 40],
  b: [40, 110, 200],
  c: [20, 70, 160],
  d: [150, 150, 150],
  e: [150, 150, 150],
  f: [230, 140, 40],
  g: [150, 150, 150],
};

const INK: Rgb = [30, 30, 30];
const GRID: Rgb = [225, 225, 225];
const WHISKER: Rgb = [60, 60, 60];

/**
 * A horizontal bar chart of msg/s per scenario (log scale, decade grid lines), each bar
 * with its min–max range over the rounds, as PNG bytes. Rendered without any
 * dependency: a bitmap font and a minimal PNG encoder.
 */
export function throughputChart(title: string, summary: readonly ScenarioSummary[]): Buffer {
  const rows = summary.filter((s) => s.dedupPreload === 0 && s.throughput !== null);
  const scale = 2;
  const labelWidth = textWidth('(x) exactly-once, per message ', scale) + 10;
  const plotWidth = 620;
  const rowHeight = 34;
  const top = 50;
  const axis = 30;
  const width = labelWidth + plotWidth + 130;
  const height = top + rows.length * rowHeight + axis + 10;
  const image = new Raster(width, height);
  drawText(image, title, 10, 12, INK, scale);

  const max = Math.max(...rows.map((r) => r.throughputMax ?? r.throughput ?? 1));
  const lo = 2; // 100 msg/s
  const hi = Math.ceil(Math.log10(max * 1.05) * 2) / 2;
  const x = (v: number) =>
    labelWidth + ((Math.log10(Math.max(v, 10 ** lo)) - lo) / (hi - lo)) * plotWidth;

  for (let decade = lo; decade <= hi; decade++) {
    const gx = x(10 ** decade);
    image.fill(gx, top - 6, 1, rows.length * rowHeight + 6, GRID);
    const label = decade >= 3 ? `${10 ** (decade - 3)}k` : `${10 ** decade}`;
    drawText(
      image,
      label,
      gx - textWidth(label, scale) / 2,
      top + rows.length * rowHeight + 8,
      INK,
      scale,
    );
  }
  rows.forEach((row, i) => {
    const y = top + i * rowHeight;
    drawText(image, `(${row.scenario}) ${SHORT[row.scenario]}`, 10, y + 9, INK, scale);
    const value = row.throughput as number;
    image.fill(labelWidth, y + 6, x(value) - labelWidth, rowHeight - 12, COLOR[row.scenario]);
    if (row.throughputMin !== null && row.throughputMax !== null) {
      const mid = y + rowHeight / 2;
      image.fill(
        x(row.throughputMin),
        mid - 1,
        x(row.throughputMax) - x(row.throughputMin) + 1,
        2,
        WHISKER,
      );
      image.fill(x(row.throughputMin), mid - 5, 2, 10, WHISKER);
      image.fill(x(row.throughputMax) - 1, mid - 5, 2, 10, WHISKER);
    }
    const text = Math.round(value).toLocaleString('en-US');
    drawText(image, text, Math.max(x(value), x(row.throughputMax ?? value)) + 8, y + 9, INK, scale);
  });
  return encodePng(image);
}
