import { durabilityLine, type Durability, type DurabilitySettings } from '../durability.js';
import { fmt } from '../format.js';
import { median, medianRoundRatio } from '../stats.js';

/** The two ways of doing the same work (bench/http/steps-server.ts). */
export type StepsModeId = 'steps' | 'tx';
export const STEPS_MODES: readonly StepsModeId[] = ['steps', 'tx'];

export const STEPS_MODE_LABELS: Record<StepsModeId, string> = {
  steps: "steps: DB step 'order', provider call 'charge', DB step 'record'",
  tx: 'one in-transaction handler: the same INSERT, provider call and UPDATE',
};

/** DB steps and outside calls of the steps mode: what its extra cost is spread over. */
export const STEPS_PER_REQUEST = 3;

export interface StepsBenchOptions {
  durability: Durability;
  durationS: number;
  warmupS: number;
  connections: number;
  rounds: number;
  pool: number;
  out: string;
  name: string | undefined;
  /** The server ran src/ through tsx instead of the build: a smoke run, not figures. */
  fromSource: boolean;
}

/** One autocannon run of one mode in one round. */
export interface StepsModeRun {
  mode: StepsModeId;
  round: number;
  /** 2xx answers. */
  requests: number;
  throughput: number;
  p50Ms: number;
  p99Ms: number;
  load1: number;
  problems: string[];
}

export interface StepsReport {
  command: string;
  date: string;
  cpus: string;
  node: string;
  postgres: string;
  loadAverageStart: number[];
  loadAverageEnd: number[];
  durability: DurabilitySettings;
  options: Omit<StepsBenchOptions, 'out' | 'name' | 'fromSource'>;
  /** The library the server ran: `dist` (the build) or `src` (`--from-source`). */
  library: 'dist' | 'src';
  runs: StepsModeRun[];
}

export interface StepsSummary {
  medians: Record<
    StepsModeId,
    { throughput: number | null; p50Ms: number | null; p99Ms: number | null }
  >;
  /** Median over rounds of steps' req/s ÷ the in-transaction handler's, same round. */
  throughputRatio: number | null;
  /** (steps p50 − tx p50) ÷ STEPS_PER_REQUEST: the latency one recorded step adds. */
  p50PerStepMs: number | null;
}

export function summarizeSteps(runs: readonly StepsModeRun[]): StepsSummary {
  const of = (mode: StepsModeId, value: (r: StepsModeRun) => number): number | null =>
    median(runs.filter((r) => r.mode === mode).map(value));
  const medians = Object.fromEntries(
    STEPS_MODES.map((m) => [
      m,
      {
        throughput: of(m, (r) => r.throughput),
        p50Ms: of(m, (r) => r.p50Ms),
        p99Ms: of(m, (r) => r.p99Ms),
      },
    ]),
  ) as StepsSummary['medians'];
  const s = medians.steps.p50Ms;
  const t = medians.tx.p50Ms;
  return {
    medians,
    throughputRatio: medianRoundRatio(runs, (r) => r.throughput, 'steps', 'tx'),
    p50PerStepMs: s === null || t === null ? null : (s - t) / STEPS_PER_REQUEST,
  };
}

export function renderStepsMarkdown(report: StepsReport, summary: StepsSummary): string {
  const o = report.options;
  const load = (l: number[]) => l.map((x) => x.toFixed(1)).join(' ');
  const lines = [
    `# HTTP bench: the cost per step (${report.durability.durability})`,
    '',
    `\`${report.command}\` — ${report.date}; ${report.cpus}, Node ${report.node}, ${report.postgres}; ` +
      `node:http with toNodeListener, pg pool ${o.pool}, the test provider in its own process, ` +
      `autocannon ${o.connections} connections × ${o.durationS} s per run, ${o.rounds} interleaved rounds ` +
      `after a ${o.warmupS} s warm-up per mode; the library from ${report.library === 'dist' ? 'its build' : 'src/ through tsx (a smoke run)'}. Load average ${load(report.loadAverageStart)} at the start, ` +
      `${load(report.loadAverageEnd)} at the end.`,
    '',
    durabilityLine(report.durability),
    '',
    '| mode | req/s (median) | min–max | p50 ms | p99 ms |',
    '| ---- | -------------: | ------: | -----: | -----: |',
  ];
  for (const mode of STEPS_MODES) {
    const m = summary.medians[mode];
    const of = report.runs.filter((r) => r.mode === mode).map((r) => r.throughput);
    if (of.length === 0) continue;
    lines.push(
      `| ${STEPS_MODE_LABELS[mode]} | ${fmt(m.throughput)} | ${fmt(Math.min(...of))}–${fmt(Math.max(...of))} | ` +
        `${fmt(m.p50Ms)} | ${fmt(m.p99Ms)} |`,
    );
  }
  lines.push(
    '',
    `steps ÷ in-transaction, req/s (median of same-round ratios): ${fmt(summary.throughputRatio, 2)}; ` +
      `p50 added per step ((steps − in-transaction) ÷ ${STEPS_PER_REQUEST}): ${fmt(summary.p50PerStepMs, 1)} ms.`,
  );
  const problems = report.runs.filter((r) => r.problems.length > 0);
  lines.push(
    '',
    problems.length === 0
      ? 'Checks: every answer 2xx; each mode wrote one order per answer, each with its charge.'
      : `PROBLEMS: ${problems.map((r) => `round ${r.round} (${r.mode}): ${r.problems.join('; ')}`).join(' · ')}`,
    '',
  );
  return lines.join('\n');
}
