import { describe, expect, it } from '@jest/globals';
import { UsageError } from '../../../kit/args.js';
import { parseBenchArgs } from '../../../bench/args.js';
import { renderLayerTable } from '../../../bench/data-layer-table.js';

describe('bench args: --data-layer', () => {
  it('runs no layer, every scenario, when absent', () => {
    const options = parseBenchArgs(['--broker', 'sqs']);
    expect(options.dataLayers).toEqual([]);
    expect(options.scenarios).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g']);
  });

  it('runs (b) and each layer, pg being (b) itself, when --scenarios is absent', () => {
    const options = parseBenchArgs(['--broker', 'sqs', '--data-layer', 'pg,typeorm,typeorm']);
    expect(options.dataLayers).toEqual(['typeorm']);
    expect(options.scenarios).toEqual(['b']);
  });

  it('keeps the scenarios given, and refuses them without (b)', () => {
    const options = parseBenchArgs([
      '--broker',
      'sqs',
      '--data-layer',
      'typeorm',
      '--scenarios',
      'a,b',
    ]);
    expect(options.scenarios).toEqual(['a', 'b']);
    expect(() =>
      parseBenchArgs(['--broker', 'sqs', '--data-layer', 'typeorm', '--scenarios', 'a,c']),
    ).toThrow(/keep b/);
  });

  it('refuses an unknown or empty layer list', () => {
    expect(() => parseBenchArgs(['--broker', 'sqs', '--data-layer', 'sequelize'])).toThrow(
      UsageError,
    );
    expect(() => parseBenchArgs(['--broker', 'sqs', '--data-layer', ''])).toThrow(UsageError);
  });
});

describe('bench: the data layers table', () => {
  it('puts each layer beside raw pg with the median of its per-round ratios', () => {
    const lines = renderLayerTable(
      { unit: 'msg/s', scenario: '(b)' },
      [
        { round: 1, throughput: 1000, p50Ms: 5, p99Ms: 9 },
        { round: 2, throughput: 500, p50Ms: 5, p99Ms: 9 },
      ],
      [
        { layer: 'typeorm', round: 1, throughput: 800, p50Ms: 6, p99Ms: 10, problems: [] },
        { layer: 'typeorm', round: 2, throughput: 450, p50Ms: 6, p99Ms: 10, problems: [] },
      ],
    );
    const row = lines.find((l) => l.startsWith('| typeorm '));
    // Ratios 0.8 and 0.9: their median 0.85, not 625 / 750.
    expect(row).toContain('| 0.85 |');
    expect(lines.find((l) => l.startsWith('| pg '))).toContain('| 750 |');
  });

  it('shows a crashed round as its problem, without a figure', () => {
    const lines = renderLayerTable(
      { unit: 'req/s', scenario: '(c)' },
      [],
      [
        {
          layer: 'typeorm',
          round: 1,
          throughput: NaN,
          p50Ms: null,
          p99Ms: null,
          problems: ['failed: boom'],
        },
      ],
    );
    expect(lines.find((l) => l.startsWith('| typeorm '))).toMatch(
      /\| – \| – \|.*round 1: failed: boom/,
    );
  });
});
