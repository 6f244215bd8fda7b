import { describe, expect, it } from '@jest/globals';
import { medianRoundRatio } from '../../../bench/stats.js';

const run = (mode: string, round: number, rate: number) => ({ mode, round, rate });

describe('medianRoundRatio', () => {
  it('divides within each round, then takes the median', () => {
    const runs = [
      run('a', 1, 100),
      run('c', 1, 50),
      run('a', 2, 200),
      run('c', 2, 60),
      run('a', 3, 10),
      run('c', 3, 9),
    ];
    // Per round 0.5, 0.3, 0.9: median 0.5 (the ratio of the medians would be 55 / 100).
    expect(medianRoundRatio(runs, (r) => r.rate, 'c', 'a')).toBe(0.5);
  });

  it('leaves out rounds missing a side or with a zero denominator; null when none is left', () => {
    const runs = [run('a', 1, 0), run('c', 1, 5), run('c', 2, 5), run('a', 3, 10), run('c', 3, 4)];
    expect(medianRoundRatio(runs, (r) => r.rate, 'c', 'a')).toBe(0.4);
    expect(medianRoundRatio(runs.slice(0, 3), (r) => r.rate, 'c', 'a')).toBeNull();
  });
});
