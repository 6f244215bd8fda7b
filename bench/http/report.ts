import { fmt } from '../format.js';

export type ModeId = 'a' | 'b' | 'c' | 'd';

export const MODE_LABELS: Record<ModeId, string> = {
  a: '(a) plain INSERT, own transaction',
  b: "(b) seed's hand-written claim handler",
  c: '(c) effectively-once/http, first execution',
  d: '(d) effectively-once/http, replay',
};

/** One autocannon run of one mode in one round. */
export interface ModeRun {
  mode: ModeId;
  round: number;
  /** 2xx answers in the run. */
  requests: number;
  /** 2xx answers per second. */
  throughput: number;
  p50Ms: number;
  p99Ms: number;
  /** The server process's CPU time (user + system) per 2xx answer, µs; null off Linux. */
  serverCpuUsPerRequest: number | null;
  problems: string[];
}

/** `npm run bench -- --http`'s options, parsed. */
export interface HttpBenchOptions {
  durationS: number;
  warmupS: number;
  connections: number;
  rounds: number;
  pool: number;
  storedKeys: number;
  out: string;
  name: string | undefined;
}

export interface HttpReport {
  command: string;
  date: string;
  cpus: string;
  node: string;
  postgres: string;
  loadAverageStart: number[];
  loadAverageEnd: number[];
  options: Omit<HttpBenchOptions, 'out' | 'name'>;
  runs: ModeRun[];
  medians: Record<
    ModeId,
    {
      throughput: number | null;
      p50Ms: number | null;
      p99Ms: number | null;
      serverCpuUsPerRequest: number | null;
    }
  >;
  /** Median over rounds of num's req/s ÷ den's, same round. */
  ratio: (num: ModeId, den: ModeId) => number | null;
}

export interface HttpTarget {
  what: string;
  ratio: number | null;
  target: number;
  met: boolean;
}

/** The issue's targets: (c) ≥ 0.7 × (a), (c) ≥ 1.0 × (b), (d) ≥ 1.0 × (a). */
export function httpTargets(report: HttpReport): HttpTarget[] {
  const t = (num: ModeId, den: ModeId, target: number): HttpTarget => {
    const ratio = report.ratio(num, den);
    return { what: `(${num}) ÷ (${den})`, ratio, target, met: ratio !== null && ratio >= target };
  };
  return [t('c', 'a', 0.7), t('c', 'b', 1.0), t('d', 'a', 1.0)];
}

export function renderHttpMarkdown(report: HttpReport): string {
  const o = report.options;
  const load = (l: number[]) => l.map((x) => x.toFixed(1)).join(' ');
  const lines = [
    '# HTTP bench: Idempotency-Key middleware vs plain and hand-written handlers',
    '',
    `\`${report.command}\` — ${report.date}; ${report.cpus}, Node ${report.node}, ${report.postgres}; ` +
      `Fastify 5, pg pool ${o.pool}, autocannon ${o.connections} connections × ${o.durationS} s per run, ` +
      `${o.rounds} interleaved rounds after a ${o.warmupS} s warm-up per mode; ${o.storedKeys} stored keys cycled in (d). ` +
      `Load average ${load(report.loadAverageStart)} at the start, ${load(report.loadAverageEnd)} at the end.`,
    '',
    '| mode | req/s (median) | min–max | p50 ms | p99 ms | server CPU µs/req | × (a) |',
    '| ---- | -------------: | ------: | -----: | -----: | ----------------: | ----: |',
  ];
  for (const mode of ['a', 'b', 'c', 'd'] as ModeId[]) {
    const m = report.medians[mode];
    const of = report.runs.filter((r) => r.mode === mode).map((r) => r.throughput);
    lines.push(
      `| ${MODE_LABELS[mode]} | ${fmt(m.throughput)} | ${fmt(Math.min(...of))}–${fmt(Math.max(...of))} | ` +
        `${fmt(m.p50Ms)} | ${fmt(m.p99Ms)} | ${fmt(m.serverCpuUsPerRequest)} | ${fmt(report.ratio(mode, 'a'), 2)} |`,
    );
  }
  lines.push(
    '',
    '| target | ratio (median of rounds) | needed | met |',
    '| --- | ---: | ---: | --- |',
  );
  for (const t of httpTargets(report))
    lines.push(
      `| ${t.what} | ${fmt(t.ratio, 2)} | ≥ ${t.target.toFixed(1)} | ${t.met ? 'yes' : 'NO'} |`,
    );
  const problems = report.runs.filter((r) => r.problems.length > 0);
  lines.push(
    '',
    problems.length === 0
      ? 'Checks: every answer 2xx; (a), (b), (c) wrote one charge per answer, (d) none.'
      : `PROBLEMS: ${problems.map((r) => `round ${r.round} (${r.mode}): ${r.problems.join('; ')}`).join(' · ')}`,
    '',
  );
  return lines.join('\n');
}
