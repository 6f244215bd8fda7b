import type { RunResult } from './protocol.js';
import { SCENARIOS, type ScenarioId } from './scenarios.js';
import { median } from './stats.js';
import type { LayerName } from '../kit/data-layers/index.js';

/** Which dedup table a run claimed in: empty, M rows of history, M rows being pruned. */
export interface Variant {
  dedupPreload: number;
  pruning: boolean;
}

export const EMPTY_TABLE: Variant = { dedupPreload: 0, pruning: false };

/** Reports from before pruning runs have no `pruning`: they had none. */
export const variantOf = (r: { dedupPreload: number; pruning?: boolean }): Variant => ({
  dedupPreload: r.dedupPreload,
  pruning: r.pruning === true,
});

const sameVariant = (r: { dedupPreload: number; pruning?: boolean }, v: Variant): boolean =>
  r.dedupPreload === v.dedupPreload && (r.pruning === true) === v.pruning;

/** Medians over the rounds of one scenario (at one dedup-table variant). */
export interface ScenarioSummary {
  scenario: ScenarioId;
  label: string;
  dedupPreload: number;
  pruning: boolean;
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
  pruning?: boolean;
  /** b through a data layer (`--data-layer`). */
  dataLayer?: LayerName;
  error: string;
}

export function summarize(
  results: readonly RunResult[],
  failures: readonly RunFailure[],
): ScenarioSummary[] {
  const groups = new Map<string, { scenario: ScenarioId; variant: Variant }>();
  for (const r of [...results, ...failures]) {
    const variant = variantOf(r);
    groups.set(`${variant.dedupPreload}:${variant.pruning}:${r.scenario}`, {
      scenario: r.scenario,
      variant,
    });
  }
  return [...groups.values()]
    .sort(
      (x, y) =>
        x.variant.dedupPreload - y.variant.dedupPreload ||
        Number(x.variant.pruning) - Number(y.variant.pruning) ||
        x.scenario.localeCompare(y.scenario),
    )
    .map(({ scenario, variant }) => {
      const runs = results.filter((r) => r.scenario === scenario && sameVariant(r, variant));
      const crashed = failures.filter((f) => f.scenario === scenario && sameVariant(f, variant));
      const tput = runs.map((r) => r.throughput);
      return {
        scenario,
        label: SCENARIOS[scenario].label,
        ...variant,
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
 * two medians would keep. The variants compare dedup tables, e.g. a growth run with
 * the same round's empty-table run.
 */
export function pairedRatio(
  runs: readonly RunResult[],
  numerator: ScenarioId,
  denominator: ScenarioId,
  numeratorVariant: Variant = EMPTY_TABLE,
  denominatorVariant: Variant = EMPTY_TABLE,
): number | null {
  const ratios: number[] = [];
  for (const top of runs) {
    if (top.scenario !== numerator || !sameVariant(top, numeratorVariant)) continue;
    const bottom = runs.find(
      (r) =>
        r.scenario === denominator && sameVariant(r, denominatorVariant) && r.round === top.round,
    );
    if (bottom !== undefined && bottom.throughput > 0)
      ratios.push(top.throughput / bottom.throughput);
  }
  return median(ratios);
}
