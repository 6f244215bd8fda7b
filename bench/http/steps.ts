/**
 * `npm run bench -- --http --steps [--no-fsync] [--duration 10] [--warmup 5] [--connections 16]
 * [--rounds 3] [--pool 16] [--out .cache/runs/bench] [--name x] [--from-source]`
 *
 * The cost per step: the same work (an order INSERT, a charge at the test provider, the
 * order's UPDATE) as a three-step flow (`idempotency.steps`) and as one in-transaction
 * handler (the provider call inside the claim's transaction), side by side in one run,
 * on one server process (bench/http/steps-server.ts), the provider in another, loaded by
 * autocannon from this one with a fresh Idempotency-Key per request. Modes interleaved
 * for `--rounds` after `--warmup` seconds each; req/s, p50 and p99 medians, the median of
 * each round's throughput ratio, and the p50 one step adds. Writes
 * `<out>/latest-http-steps[-no-fsync][-<name>].{json,md}`. The server runs the compiled
 * library (`npm run build` first) unless `--from-source` (smoke runs: src/ through tsx).
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import pg from 'pg';
import { intOption } from '../../kit/args.js';
import { runDir } from '../../kit/results.js';
import { durabilitySuffix, ensureDurability } from '../durability.js';
import { ensureServices } from '../services.js';
import { startProviderProcess } from './provider-process.js';
import { buildLibrary, startServer } from './server-process.js';
import {
  renderStepsMarkdown,
  STEPS_MODES,
  summarizeSteps,
  type StepsBenchOptions,
  type StepsModeId,
  type StepsModeRun,
  type StepsReport,
} from './steps-report.js';

const SCHEMA = 'eo_bench_steps';
const BODY = JSON.stringify({ customerId: 'cus_42', amountCents: 1999 });

function parse(argv: string[]): StepsBenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      http: { type: 'boolean' },
      steps: { type: 'boolean' },
      'no-fsync': { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      rounds: { type: 'string' },
      pool: { type: 'string' },
      out: { type: 'string', default: runDir('bench') },
      name: { type: 'string' },
      'from-source': { type: 'boolean', default: false },
    },
  });
  return {
    durability: values['no-fsync'] ? 'no-fsync' : 'durable',
    durationS: intOption('duration', values.duration, 10, 1, 600),
    warmupS: intOption('warmup', values.warmup, 5, 0, 600),
    connections: intOption('connections', values.connections, 16, 1, 1000),
    rounds: intOption('rounds', values.rounds, 3, 1, 20),
    pool: intOption('pool', values.pool, 16, 1, 200),
    out: values.out,
    name: values.name === undefined ? undefined : values.name.replace(/[^A-Za-z0-9_-]/g, '-'),
    fromSource: values['from-source'],
  };
}

async function createTables(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await client.query(`CREATE SCHEMA ${SCHEMA}`);
    await client.query(`CREATE TABLE ${SCHEMA}.orders (
      id bigserial PRIMARY KEY, customer_id text NOT NULL, amount_cents bigint NOT NULL,
      charge_id text, created_at timestamptz NOT NULL DEFAULT now())`);
  } finally {
    await client.end();
  }
}

/** Orders written so far, and those with their charge recorded. */
async function countOrders(pool: pg.Pool): Promise<{ orders: number; charged: number }> {
  const { rows } = await pool.query<{ orders: number; charged: number }>(
    `SELECT count(*)::int AS orders, count(charge_id)::int AS charged FROM ${SCHEMA}.orders`,
  );
  return rows[0] ?? { orders: 0, charged: 0 };
}

/** One autocannon run of one mode, a fresh key per request; `round` 0 is the warm-up. */
function load(
  port: number,
  mode: StepsModeId,
  round: number,
  options: StepsBenchOptions,
  durationS: number,
): Promise<autocannon.Result> {
  let n = 0;
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: options.connections,
    duration: durationS,
    requests: [
      {
        method: 'POST',
        path: `/${mode}`,
        headers: { 'content-type': 'application/json' },
        body: BODY,
        setupRequest: (request) => ({
          ...request,
          headers: { ...request.headers, 'idempotency-key': `${mode}-${round}-${n++}` },
        }),
      },
    ],
  });
}

export async function runStepsBench(argv: string[]): Promise<void> {
  const options = parse(argv);
  const command = `npm run bench -- ${argv.join(' ')}`;
  const loadAverageStart = os.loadavg();
  const services = await ensureServices(null);
  const children: ChildProcess[] = [];
  try {
    const url = services.endpoints.databaseUrl;
    const durability = await ensureDurability(
      url,
      options.durability,
      services.started.includes('postgres'),
    );
    await createTables(url);
    if (!options.fromSource) buildLibrary();
    const provider = await startProviderProcess();
    children.push(provider.child);
    const started = await startServer(url, SCHEMA, options.pool, null, undefined, {
      entry: fileURLToPath(new URL('./steps-server.ts', import.meta.url)),
      env: { BENCH_PROVIDER_URL: provider.url },
      fromSource: options.fromSource,
    });
    children.push(started.child);
    const { port } = started;
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    try {
      console.log(`[bench] warm-up: ${options.warmupS} s per mode`);
      if (options.warmupS > 0)
        for (const mode of STEPS_MODES) await load(port, mode, 0, options, options.warmupS);
      const runs: StepsModeRun[] = [];
      for (let round = 1; round <= options.rounds; round++) {
        for (const mode of STEPS_MODES) {
          const before = await countOrders(admin);
          const result = await load(port, mode, round, options, options.durationS);
          // Requests still in flight when autocannon stopped its clock finish now.
          await new Promise((resolve) => setTimeout(resolve, 1000));
          const after = await countOrders(admin);
          const ok = result['2xx'];
          const problems: string[] = [];
          if (result.non2xx > 0) problems.push(`${result.non2xx} non-2xx answers`);
          if (result.errors > 0) problems.push(`${result.errors} errors`);
          if (ok === 0) problems.push('no answer in the run: nothing measured');
          const orders = after.orders - before.orders;
          const charged = after.charged - before.charged;
          // One order per first execution (up to one per connection in flight at the end, uncounted).
          if (orders < ok || orders > ok + options.connections)
            problems.push(`${orders} orders written for ${ok} answers`);
          if (charged < ok) problems.push(`${charged} orders charged for ${ok} answers`);
          const run: StepsModeRun = {
            mode,
            round,
            requests: ok,
            throughput: ok / options.durationS,
            p50Ms: result.latency.p50,
            p99Ms: result.latency.p99,
            load1: os.loadavg()[0] ?? NaN,
            problems,
          };
          runs.push(run);
          console.log(
            `[bench] round ${round} (${mode}): ${Math.round(run.throughput)} req/s, p50 ${run.p50Ms} ms, ` +
              `p99 ${run.p99Ms} ms, load ${run.load1.toFixed(1)}${problems.length ? `  PROBLEMS: ${problems.join('; ')}` : ''}`,
          );
        }
      }
      const report: StepsReport = {
        command,
        date: new Date().toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
        cpus: `${os.cpus().length}× ${os.cpus()[0]?.model.trim() ?? 'cpu'}`,
        node: process.versions.node,
        postgres: await admin
          .query<{ v: string }>(`SELECT current_setting('server_version') AS v`)
          .then((r) => `Postgres ${r.rows[0]?.v ?? '?'}`),
        loadAverageStart,
        loadAverageEnd: os.loadavg(),
        durability,
        library: options.fromSource ? 'src' : 'dist',
        options: {
          durability: options.durability,
          durationS: options.durationS,
          warmupS: options.warmupS,
          connections: options.connections,
          rounds: options.rounds,
          pool: options.pool,
        },
        runs,
      };
      const summary = summarizeSteps(runs);
      const markdown = renderStepsMarkdown(report, summary);
      const base = path.join(
        options.out,
        `latest-http-steps${durabilitySuffix(options.durability)}${options.name ? `-${options.name}` : ''}`,
      );
      fs.mkdirSync(options.out, { recursive: true });
      fs.writeFileSync(`${base}.json`, JSON.stringify({ ...report, summary }, null, 2) + '\n');
      fs.writeFileSync(`${base}.md`, markdown);
      console.log(`\n${markdown}\nwritten to ${base}.{md,json}`);
      if (runs.some((r) => r.problems.length > 0)) process.exitCode = 1;
    } finally {
      await admin.end();
    }
  } finally {
    for (const child of children.reverse()) {
      if (child.exitCode !== null || child.signalCode !== null) continue;
      const gone = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await gone;
    }
    await services.stop();
  }
}
