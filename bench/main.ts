/**
 * `tsx bench/main.ts --broker sqs|kafka --messages N [--concurrency C] [--rounds R] [--out dir]`
 *
 * Starts what it needs (Postgres and the broker, natively, unless DATABASE_URL and
 * SQS_ENDPOINT / KAFKA_BROKERS are set), then runs every scenario R times, interleaved
 * (a,b,c,d,e,f, a,b,c,...), each in a fresh process against a fresh queue/topic and
 * empty tables, and writes `<out>/latest-<broker>.{json,md}`. See bench/README.md.
 * `--http` runs the HTTP bench instead (bench/http/main.ts); `--http-sql` its SQL alone under
 * pgbench (bench/http/sql-ceiling.ts); `--http --steps` the cost per step (bench/http/steps.ts).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { runCli } from '../kit/args.js';
import { BENCH_USAGE, parseBenchArgs, type BenchOptions } from './args.js';
import { BENCH_SCHEMA, createPool, createSchema } from './db.js';
import { dropHistory, HISTORY_SCHEMA, preloadHistory } from './history.js';
import type { RunResult, ScenarioTask } from './protocol.js';
import { renderMarkdown, type Environment, type Report } from './report.js';
import type { ScenarioId } from './scenarios.js';
import { ensureServices, type Endpoints } from './services.js';
import { killChildren, runInChild } from './spawn.js';
import { pairedRatio, summarize, type RunFailure } from './summary.js';
import { evaluateTargets } from './targets.js';
import { throughputChart } from './chart.js';
import { renderLayerTable, type LayerRun } from './data-layer-table.js';
import type { LayerName } from '../kit/data-layers/index.js';

/** The layers' runs of b, and the rounds that crashed, for their table. */
function layerRuns(runs: readonly RunResult[], failures: readonly RunFailure[]): LayerRun[] {
  return [
    ...runs.flatMap((r) =>
      r.dataLayer === undefined
        ? []
        : [
            {
              layer: r.dataLayer,
              round: r.round,
              throughput: r.throughput,
              p50Ms: r.p50Ms,
              p99Ms: r.p99Ms,
              problems: r.problems,
            },
          ],
    ),
    ...failures.flatMap((f) =>
      f.dataLayer === undefined
        ? []
        : [
            {
              layer: f.dataLayer,
              round: f.round,
              throughput: NaN,
              p50Ms: null,
              p99Ms: null,
              problems: [`failed: ${f.error.split('\n')[0] ?? ''}`],
            },
          ],
    ),
  ];
}

async function postgresVersion(url: string): Promise<string> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ v: string }>(
      `SELECT current_setting('server_version') AS v`,
    );
    return `Postgres ${rows[0]?.v ?? '?'}`;
  } finally {
    await client.end();
  }
}

type Step = {
  scenario: ScenarioId;
  round: number;
  dedupPreload: number;
  pruning: boolean;
  /** b through a data layer (`--data-layer`). */
  dataLayer?: LayerName;
};

/**
 * The runs of one bench, in order: rounds of the scenario list, plus per round the
 * dedup-growth runs and the pruning runs, so each pairs with the same round's
 * empty-table run.
 */
function plan(options: BenchOptions): Step[] {
  const runs: Step[] = [];
  const among = (ids: ScenarioId[]): ScenarioId[] =>
    ids.filter((s) => options.scenarios.includes(s));
  for (let round = 1; round <= options.rounds; round++) {
    for (const scenario of options.scenarios)
      runs.push({ scenario, round, dedupPreload: 0, pruning: false });
    for (const dataLayer of options.dataLayers)
      runs.push({ scenario: 'b', round, dedupPreload: 0, pruning: false, dataLayer });
    if (options.dedupRows === 0) continue;
    for (const scenario of among(['b', 'c', 'e', 'g']))
      runs.push({ scenario, round, dedupPreload: options.dedupRows, pruning: false });
    if (!options.pruneWhileConsuming) continue;
    for (const scenario of among(['b', 'c']))
      runs.push({ scenario, round, dedupPreload: options.dedupRows, pruning: true });
  }
  return runs;
}

async function runAll(
  options: BenchOptions,
  endpoints: Endpoints,
): Promise<{ runs: RunResult[]; failures: RunFailure[] }> {
  const runs: RunResult[] = [];
  const failures: RunFailure[] = [];
  const all = plan(options);
  for (const [i, step] of all.entries()) {
    const task: ScenarioTask = {
      broker: options.broker,
      ...step,
      messages: options.messages,
      concurrency: options.concurrency,
      consumerConcurrency: options.consumerConcurrency,
      batchSize: options.batchSize,
      inboxBatch: options.inboxBatch,
      partitions: options.partitions,
      keyConcurrency: options.keyConcurrency,
      kafkaClient: options.kafkaClient,
      dedupSchema: step.dedupPreload > 0 ? HISTORY_SCHEMA : BENCH_SCHEMA,
      memoryRun: options.memoryRun,
      endpoints,
    };
    const what =
      `[${i + 1}/${all.length}] round ${step.round} (${step.scenario})` +
      (step.dedupPreload ? ` +${step.dedupPreload} dedup rows` : '') +
      (step.pruning ? ' +pruning' : '') +
      (step.dataLayer === undefined ? '' : ` through ${step.dataLayer}`);
    try {
      // The history's reset (a VACUUM, a count, after a pruning run a restore) grows with its size.
      const timeoutMs = 300_000 + options.messages * 20 + step.dedupPreload / 10;
      const result = await runInChild(
        task,
        timeoutMs,
        options.profile ? path.join(options.out, 'profiles') : undefined,
      );
      runs.push(result);
      console.log(
        `${what}: ${Math.round(result.throughput)} msg/s, p50 ${Math.round(result.p50Ms ?? NaN)} ms, ` +
          `p99 ${Math.round(result.p99Ms ?? NaN)} ms, peak RSS ${result.peakRssMb} MB` +
          Object.entries(result.notes)
            .map(([k, v]) => `, ${k} ${v.toFixed(1)}`)
            .join('') +
          (result.problems.length ? `  PROBLEMS: ${result.problems.join('; ')}` : ''),
      );
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      failures.push({ ...step, error: message });
      console.error(`${what}: FAILED ${message}`);
    }
  }
  return { runs, failures };
}

async function main(): Promise<void> {
  // The HTTP side (bench/http/): the Idempotency-Key middleware under autocannon.
  if (process.argv.includes('--http-sql')) {
    const { runHttpSqlCeiling } = await import('./http/sql-ceiling.js');
    return runHttpSqlCeiling(process.argv.slice(2));
  }
  if (process.argv.includes('--http') && process.argv.includes('--steps')) {
    const { runStepsBench } = await import('./http/steps.js');
    return runStepsBench(process.argv.slice(2));
  }
  if (process.argv.includes('--http')) {
    const { runHttpBench } = await import('./http/main.js');
    return runHttpBench(process.argv.slice(2));
  }
  // The AWS SDK's "Node 22 from 2027" notice, once per process, is noise in every run.
  process.env['AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED'] ??= 'true';
  if (process.argv.includes('--outbox')) {
    const { runOutboxBench } = await import('./outbox.js');
    return runOutboxBench(process.argv.slice(2));
  }
  const options = parseBenchArgs(process.argv.slice(2));
  const command = `npm run bench -- ${process.argv.slice(2).join(' ')}`;
  const loadAverageStart = os.loadavg();
  const services = await ensureServices(options.broker);
  const stopOnSignal = (): void => {
    killChildren();
    void services.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', stopOnSignal);
  process.once('SIGTERM', stopOnSignal);
  try {
    const { databaseUrl } = services.endpoints;
    const setupPool = createPool(databaseUrl, 1);
    await createSchema(setupPool).finally(() => setupPool.end());
    // Loaded once, before any run: every dedup-growth run then only resets its own rows.
    if (options.dedupRows > 0) await preloadHistory(databaseUrl, options.dedupRows, options.broker);
    const { runs, failures } = await runAll(options, services.endpoints).finally(() =>
      options.dedupRows > 0 ? dropHistory(databaseUrl) : undefined,
    );
    // The layers' runs of b are reported apart, beside raw pg's b (data-layer-table.ts).
    const summary = summarize(
      runs.filter((r) => r.dataLayer === undefined),
      failures.filter((f) => f.dataLayer === undefined),
    );
    const environment: Environment = {
      command,
      date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
      cpus: `${os.cpus().length}× ${os.cpus()[0]?.model.trim() ?? 'cpu'}`,
      node: process.versions.node,
      postgres: await postgresVersion(databaseUrl),
      broker: {
        sqs: 'ElasticMQ, native JVM',
        kafka: 'Apache Kafka (KRaft, 1 broker), native JVM',
        rabbitmq: "RabbitMQ (Debian's rabbitmq-server, 1 node, quorum queues)",
      }[options.broker],
      loadAverageStart,
      loadAverageEnd: os.loadavg(),
      servicesStartedByBench: services.started,
    };
    const report: Report = {
      options,
      environment,
      summary,
      targets: evaluateTargets(
        options.broker,
        (num, den) => pairedRatio(runs, num, den),
        (id) => summary.find((s) => s.scenario === id && s.dedupPreload === 0)?.throughput ?? null,
      ),
      runs,
      failures,
    };
    const markdown = [
      renderMarkdown(report),
      ...renderLayerTable(
        { unit: 'msg/s', scenario: '(b) effectively-once, per-message tx' },
        runs.filter((r) => r.scenario === 'b' && r.dataLayer === undefined && r.dedupPreload === 0),
        layerRuns(runs, failures),
      ),
      '',
    ].join('\n');
    const base = path.join(
      options.out,
      `latest-${options.broker}${options.name ? `-${options.name}` : ''}`,
    );
    fs.mkdirSync(options.out, { recursive: true });
    fs.writeFileSync(`${base}.json`, JSON.stringify(report, null, 2) + '\n');
    fs.writeFileSync(`${base}.md`, markdown);
    const written = ['md', 'json'];
    const chart = throughputChart(report);
    if (chart !== undefined) {
      fs.writeFileSync(`${base}.svg`, chart);
      written.push('svg');
    }
    console.log(`\n${markdown}\nwritten to ${base}.{${written.join(',')}}`);
    if (
      failures.length > 0 ||
      summary.some((s) => s.problems.length > 0) ||
      runs.some((r) => r.dataLayer !== undefined && r.problems.length > 0)
    )
      process.exitCode = 1;
  } finally {
    await services.stop();
  }
}

runCli(
  'bench',
  () => BENCH_USAGE,
  async () => {
    await main();
    return Number(process.exitCode ?? 0);
  },
);
