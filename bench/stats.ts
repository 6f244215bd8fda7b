/** Nearest-rank percentile of unsorted samples; null when there are none. */
export function percentile(samples: readonly number[], q: number): number | null {
  if (samples.length === 0) return null;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? null;
}

export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * The median over rounds of `num`'s value ÷ `den`'s in the same round: ratios taken
 * side by side, so a round on a busier machine moves both. Rounds missing either, or
 * with a zero denominator, are left out; null when none is left.
 */
export function medianRoundRatio<R extends { mode: string; round: number }>(
  runs: readonly R[],
  value: (run: R) => number,
  num: R['mode'],
  den: R['mode'],
): number | null {
  const ratios: number[] = [];
  for (const n of runs) {
    if (n.mode !== num) continue;
    const d = runs.find((r) => r.mode === den && r.round === n.round);
    if (d !== undefined && value(d) > 0) ratios.push(value(n) / value(d));
  }
  return median(ratios);
}
