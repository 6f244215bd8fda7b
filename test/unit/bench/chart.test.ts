import { describe, expect, it } from '@jest/globals';
import { throughputChart } from '../../../bench/chart.js';
import type { Report } from '../../../bench/report.js';
import type { ScenarioSummary } from '../../../bench/summary.js';

function report(rows: Array<Partial<ScenarioSummary>>): Report {
  const summary = rows.map((r) => ({
    dedupPreload: 0,
    throughputMin: null,
    throughputMax: null,
    ...r,
  }));
  return { options: { broker: 'kafka', rounds: 5 }, summary } as unknown as Report;
}

const widths = (svg: string): number[] =>
  [...svg.matchAll(/<rect x="240" y="\d+" width="([\d.]+)"/g)].map((m) => Number(m[1]));

describe('bench throughput chart (SVG)', () => {
  it('draws one bar per empty-table scenario, longer for more msg/s on a log scale', () => {
    const svg = throughputChart(
      report([
        { scenario: 'a', throughput: 1_000, throughputMin: 900, throughputMax: 1_100 },
        { scenario: 'b', throughput: 10_000 },
        { scenario: 'c', throughput: 100_000 },
        { scenario: 'b', throughput: 5, dedupPreload: 10_000_000 },
      ]),
    );
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"[^>]*>\n/);
    expect(svg).toMatch(/<\/svg>\n$/);
    expect(svg).toContain('Kafka: msg/s per scenario (log scale), median of 5 round(s)');
    const [a = 0, b = 0, c = 0, ...rest] = widths(svg ?? '');
    expect(rest).toEqual([]);
    // Each decade adds the same length.
    expect(b - a).toBeCloseTo(c - b, 0);
    expect(b).toBeGreaterThan(a);
    expect(svg).toContain('>1,000</text>');
    expect(svg).toContain('>100,000</text>');
    // The min–max whisker only where the rounds gave a range.
    expect(svg?.match(/<path /g)).toHaveLength(1);
  });

  it('draws nothing for a single scenario', () => {
    expect(throughputChart(report([{ scenario: 'c', throughput: 27_000 }]))).toBeUndefined();
  });
});
