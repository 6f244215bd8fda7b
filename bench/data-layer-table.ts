import type { LayerName } from '../kit/data-layers/index.js';
import { fmt } from './format.js';
import { median } from './stats.js';

/** One timed run of a data layer's handler, and the raw-pg run of the same round it is beside. */
export interface LayerRun {
  layer: LayerName;
  round: number;
  /** msg/s (consumer) or req/s (HTTP). */
  throughput: number;
  p50Ms: number | null;
  p99Ms: number | null;
  problems: string[];
}

/**
 * The data layers' table (`--data-layer`): each layer's median throughput beside raw pg's
 * (`baseline`: pg's runs of the same scenario, by round) and the median of the per-round
 * ratios, so a layer's cost reads as a fraction of raw pg under the same load.
 */
export function renderLayerTable(
  what: { unit: 'msg/s' | 'req/s'; scenario: string },
  baseline: ReadonlyArray<{
    round: number;
    throughput: number;
    p50Ms: number | null;
    p99Ms: number | null;
  }>,
  runs: readonly LayerRun[],
): string[] {
  if (runs.length === 0) return [];
  const rows = [
    `| data layer | ${what.unit} | ×(raw pg) | p50 ms | p99 ms | check |`,
    '|---|--:|--:|--:|--:|---|',
    `| pg (raw, the door's own client) | ${fmt(median(baseline.map((r) => r.throughput)))} | 1.00 | ` +
      `${fmt(median(baseline.flatMap((r) => (r.p50Ms === null ? [] : [r.p50Ms]))))} | ` +
      `${fmt(median(baseline.flatMap((r) => (r.p99Ms === null ? [] : [r.p99Ms]))))} | |`,
  ];
  const layers = [...new Set(runs.map((r) => r.layer))];
  for (const layer of layers) {
    // A round that crashed has no figure (NaN), only its problem.
    const all = runs.filter((r) => r.layer === layer);
    const of = all.filter((r) => Number.isFinite(r.throughput));
    const ratios = of.flatMap((r) => {
      const base = baseline.find((b) => b.round === r.round);
      return base === undefined || base.throughput <= 0 ? [] : [r.throughput / base.throughput];
    });
    const ratio = median(ratios);
    const problems = all.flatMap((r) => r.problems.map((p) => `round ${r.round}: ${p}`));
    rows.push(
      `| ${layer} | ${fmt(median(of.map((r) => r.throughput)))} | ${ratio === null ? '–' : ratio.toFixed(2)} | ` +
        `${fmt(median(of.flatMap((r) => (r.p50Ms === null ? [] : [r.p50Ms]))))} | ` +
        `${fmt(median(of.flatMap((r) => (r.p99Ms === null ? [] : [r.p99Ms]))))} | ${problems.length === 0 ? 'ok' : problems.join('; ')} |`,
    );
  }
  return [
    '',
    `### Data layers: ${what.scenario}, the handler written through each layer (\`--data-layer\`)`,
    '',
    `Each layer's run is the same scenario with the door's \`dataLayer\` set and the effect written with the layer's own raw call on \`ctx.tx\`; ×(raw pg): the median of the per-round ratios to the raw-pg run of the same round. No target: this is the layer's cost.`,
    '',
    ...rows,
  ];
}
