import type { RunResult } from './protocol.js';
import { SCENARIOS, type ScenarioId } from './scenarios.js';
import { median } from './stats.js';

/** Medians over the rounds of one scenario (at one dedup-table size). */
export interface ScenarioSummary {
  scenario: ScenarioId;
  label: string;
  dedupPreload: number;
  runs: number;
  throughput: number | null;
  throughputMin: number | null;
  throughputMax: number | null;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Highest peak RSS of any round. */
  peakRssMb: number | null;
  /** Median of each diagnostic over the rounds. */
  notes: Record<string, number>;
  /** Checks that failed in any round, and rounds that crashed. */
  problems: string[];
}

export interface RunFailure {
  scenario: ScenarioId;
  round: number;
  dedupPreload: number;
  error: string;
}

export function summarize(
  results: readonly RunResult[],
  failures: readonly RunFailure[],
): ScenarioSummary[] {
  const groups = new Map<string, { scenario: ScenarioId; dedupPreload: number }>();
  for (const r of [...results, ...failures]) groups.set(`${r.dedupPreload}:${r.scenario}`, r);
  return [...groups.values()]
    .sort((x, y) => x.dedupPreload - y.dedupPreload || x.scenario.localeCompare(y.scenario))
    .map(({ scenario, dedupPreload }) => {
      const runs = results.filter(
        (r) => r.scenario === scenario && r.dedupPreload === dedupPreload,
      );
      const crashed = failures.filter(
        (f) => f.scenario === scenario && f.dedupPreload === dedupPreload,
      );
      const tput = runs.map((r) => r.throughput);
      return {
        scenario,
        label: SCENARIOS[scenario].label,
        dedupPreload,
        runs: runs.length,
        throughput: median(tput),
        throughputMin: tput.length ? Math.min(...tput) : null,
        throughputMax: tput.length ? Math.max(...tput) : null,
        p50Ms: median(runs.flatMap((r) => (r.p50Ms === null ? [] : [r.p50Ms]))),
        p99Ms: median(runs.flatMap((r) => (r.p99Ms === null ? [] : [r.p99Ms]))),
        notes: medianNotes(runs),
        peakRssMb: runs.length ? Math.max(...runs.map((r) => r.peakRssMb)) : null,
        problems: [
          ...new Set([
            ...runs.flatMap((r) => r.problems.map((p) => `round ${r.round}: ${p}`)),
            ...crashed.map((f) => `round ${f.round} failed: ${f.error.split('\n')[0]}`),
          ]),
        ],
      };
    });
}

function medianNotes(runs: readonly RunResult[]): Record<string, number> {
  const keys = new Set(runs.flatMap((r) => Object.keys(r.notes)));
  const out: Record<string, number> = {};
  for (const key of keys) {
    const m = median(runs.flatMap((r) => (Number.isFinite(r.notes[key]) ? [r.notes[key]!] : [])));
    if (m !== null) out[key] = Math.round(m * 100) / 100;
  }
  return out;
}

/**
 * Median over rounds of (numerator ÷ denominator) within the same round: rounds are
 * interleaved, so pairing them cancels the load swings between rounds that a ratio of
 * two medians would keep. `numeratorPreload` compares a dedup-growth run with the
 * empty-table run of the same round.
 */
export function pairedRatio(
  runs: readonly RunResult[],
  numerator: ScenarioId,
  denominator: ScenarioId,
  numeratorPreload = 0,
): number | null {
  const ratios: number[] = [];
  for (const top of runs) {
    if (top.scenario !== numerator || top.dedupPreload !== numeratorPreload) continue;
    const bottom = runs.find(
      (r) => r.scenario === denominator && r.dedupPreload === 0 && r.round === top.round,
    );
    if (bottom !== undefined && bottom.throughput > 0)
      ratios.push(top.throughput / bottom.throughput);
  }
  return median(ratios);
}
