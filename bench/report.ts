import { BROKER_LABELS } from './broker.js';
import type { BenchOptions } from './args.js';
import { fmt } from './format.js';
import type { RunResult } from './protocol.js';
import { renderGrowth } from './report-growth.js';
import { renderMemory } from './report-memory.js';
import type { ScenarioId } from './scenarios.js';
import { pairedRatio, type RunFailure, type ScenarioSummary } from './summary.js';
import { wallOf, type TargetResult } from './targets.js';

/** Where and how the figures were taken. */
export interface Environment {
  command: string;
  date: string;
  cpus: string;
  node: string;
  postgres: string;
  broker: string;
  loadAverageStart: number[];
  loadAverageEnd: number[];
  servicesStartedByBench: string[];
}

export interface Report {
  options: BenchOptions;
  environment: Environment;
  summary: ScenarioSummary[];
  targets: TargetResult[];
  runs: RunResult[];
  failures: RunFailure[];
}

const RATIO_BASES: ScenarioId[] = ['a', 'd', 'e', 'f', 'g'];

const load = (l: number[]): string => l.map((x) => x.toFixed(1)).join(' / ');

export function renderMarkdown(report: Report): string {
  const { options: o, environment: env } = report;
  const main = report.summary.filter((s) => s.dedupPreload === 0);
  const tput = (id: ScenarioId): number | null =>
    main.find((s) => s.scenario === id)?.throughput ?? null;
  const lines: string[] = [];
  lines.push(
    `## Bench: ${BROKER_LABELS[o.broker]} (${env.broker}) + Postgres (${env.postgres})`,
    '',
  );
  lines.push('```', env.command, '```', '');
  lines.push(
    `${fmt(o.messages)} messages pre-filled per run; concurrency ${o.concurrency} (pool of ${o.concurrency} connections in every scenario${o.consumerConcurrency === o.concurrency ? '' : `; createConsumer concurrency ${o.consumerConcurrency} in b, c`})` +
      `${o.broker === 'kafka' ? `, ${o.partitions} partitions, kafkaSource keyConcurrency ${o.keyConcurrency}${o.kafkaClient === 'platformatic' ? ' over @platformatic/kafka in b and c' : ''}` : ''}; batch mode maxSize ${o.batchSize}; inbox worker batch ${o.inboxBatch}; ` +
      `${o.rounds} round(s) of ${o.scenarios.join(',')} interleaved; msg/s, latency: median over rounds (range = min–max msg/s); ×(x): median of the per-round ratios. ` +
      `${env.date}, ${env.cpus}, Node ${env.node}.`,
    '',
    `The scenario process, the broker and Postgres share the machine's cores, with whatever else runs on it ` +
      `(load average ${load(env.loadAverageStart)} before the services started, ${load(env.loadAverageEnd)} at the end). ` +
      `Absolute figures move with that load; the ratios within one run are what this table is for.`,
    '',
  );
  const present = RATIO_BASES.filter((id) => tput(id) !== null);
  lines.push(
    `| scenario | msg/s | range | ${present.map((id) => `×(${id})`).join(' | ')} | p50 ms | p99 ms | peak RSS MB | check |`,
    `|---|--:|--:|${present.map(() => '--:|').join('')}--:|--:|--:|---|`,
  );
  for (const s of main) {
    const ratios = present.map((id) => {
      const r = pairedRatio(report.runs, s.scenario, id);
      return r === null ? '–' : r.toFixed(2);
    });
    lines.push(
      `| (${s.scenario}) ${s.label} | ${fmt(s.throughput)} | ${fmt(s.throughputMin)}–${fmt(s.throughputMax)} | ${ratios.join(' | ')} | ` +
        `${fmt(s.p50Ms)} | ${fmt(s.p99Ms)} | ${fmt(s.peakRssMb)} | ${s.problems.length === 0 ? 'ok' : s.problems.join('; ')} |`,
    );
  }
  lines.push('', '| target | measured | | reachable? |', '|---|--:|---|---|');
  for (const t of report.targets) {
    lines.push(
      `| (${t.numerator}) ≥ ${t.min}×(${t.denominator}): ${t.why} | ${t.ratio === null ? '–' : `${t.ratio.toFixed(2)}×`} | ` +
        `${t.met === null ? 'not measured' : t.met ? '**met**' : '**not met**'} | ${wallOf(t)} |`,
    );
  }
  lines.push(...renderGrowth(report.summary, report.runs));
  lines.push(...renderMemory(report.runs));
  const noted = main.filter((s) => Object.keys(s.notes).length > 0);
  if (noted.length > 0) {
    lines.push(
      '',
      'Diagnostics (medians over rounds): avgDeliverToSettledMs / avgHandlerAndCommitMs = ms per delivery from reaching the runner to settled, and in handler + COMMIT; ' +
        'nodeCpuPct = scenario process CPU over the drain (% of one core); eventLoopUtilization near 1 = the process itself is the bottleneck.',
      '',
    );
    for (const s of noted) {
      lines.push(
        `- (${s.scenario}): ${Object.entries(s.notes)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
    }
  }
  lines.push(
    '',
    'msg/s: N ÷ (clock start → last message committed *and* acked; the clock starts at the first message seen (SQS, RabbitMQ) or at the group join (Kafka)). Latency: send → effect row written ' +
      '(`clock_timestamp()` in the row; d: send → DeleteMessageBatch/commit confirmed, RabbitMQ: ack written); with a pre-filled queue it is mostly ' +
      'time spent waiting in the queue, so it tracks drain time. Peak RSS: the scenario process (one per run).',
    '',
  );
  return lines.join('\n');
}
