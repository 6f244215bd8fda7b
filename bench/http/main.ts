/**
 * `npm run bench -- --http [--no-fsync] [--duration 10] [--warmup 10] [--connections 16]
 * [--rounds 3] [--pool 16] [--keys 1000] [--modes a,b,c,d] [--cpu-prof] [--out .cache/runs/bench]
 * [--name x]`
 *
 * The Idempotency-Key middleware side by side with what it replaces, in one run, on
 * one Fastify server (a child process, bench/http/server.ts) and one Postgres, loaded
 * by autocannon from this process over loopback:
 *   (a) plain: the same INSERT in its own transaction, no idempotency;
 *   (b) seed: the seed text's hand-written claim-then-insert handler, unique keys;
 *   (c) eo: effectively-once/http, first executions (unique keys);
 *   (d) replay: effectively-once/http, keys already stored (answered from the record).
 * Modes are interleaved (a, b, c, d, a, b, ...) for `--rounds`, after `--warmup` seconds of
 * each (long enough for the slowest mode's code to be optimized by V8 before it is timed);
 * medians and the median of each round's ratio are reported, with the issue's targets.
 * Against a durable Postgres by default (bench/durability.ts), `--no-fsync` for the
 * CPU-bound run. `--cpu-prof` writes the server process's V8 CPU profile (its whole life:
 * with `--modes c` that is mostly (c)) to `<out>/profiles/` when it exits.
 * Writes `<out>/latest-http[-no-fsync][-<name>].{json,md}`.
 */
import { runDir } from '../../kit/results.js';
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import pg from 'pg';
import { intOption, UsageError } from '../../kit/args.js';
import { dataLayerList } from '../data-layer-args.js';
import { renderLayerTable, type LayerRun } from '../data-layer-table.js';
import type { LayerName } from '../../kit/data-layers/index.js';
import { ensureServices } from '../services.js';
import { durabilitySuffix, ensureDurability } from '../durability.js';
import { buildLibrary, cpuMs, startServer } from './server-process.js';
import { createBenchTables } from './tables.js';
import { median, medianRoundRatio } from '../stats.js';
import {
  httpTargets,
  MODE_LABELS,
  renderHttpMarkdown,
  type HttpBenchOptions,
  type HttpReport,
  type ModeId,
  type ModeRun,
  type SqlRatios,
} from './report.js';

const SCHEMA = 'eo_bench_http';
const BODY = JSON.stringify({ customerId: 'cus_42', amountCents: 1999 });
/** Each mode's route, and which keys its requests carry. */
const MODES: Record<ModeId, { path: string; keys: 'none' | 'unique' | 'stored' }> = {
  a: { path: '/plain', keys: 'none' },
  b: { path: '/seed', keys: 'unique' },
  c: { path: '/eo', keys: 'unique' },
  d: { path: '/eo', keys: 'stored' },
};

function parse(argv: string[]): HttpBenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      http: { type: 'boolean' },
      'no-fsync': { type: 'boolean', default: false },
      modes: { type: 'string', default: 'a,b,c,d' },
      'cpu-prof': { type: 'boolean', default: false },
      duration: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      rounds: { type: 'string' },
      pool: { type: 'string' },
      keys: { type: 'string' },
      out: { type: 'string', default: runDir('bench') },
      name: { type: 'string' },
      'data-layer': { type: 'string' },
    },
  });
  const dataLayers = dataLayerList(values['data-layer']);
  // With layers and no --modes: (c) alone, the raw-pg run each layer's is beside.
  const modeList =
    dataLayers === undefined || argv.some((a) => a === '--modes' || a.startsWith('--modes='))
      ? values.modes
      : 'c';
  const modes = modeList.split(',').map((m) => m.trim());
  const unknown = modes.filter((m) => !(m in MODES));
  if (unknown.length > 0 || modes.length === 0)
    throw new Error(`--modes: a comma-separated list of a, b, c, d (got ${values.modes})`);
  if (dataLayers !== undefined && dataLayers.length > 0 && !modes.includes('c'))
    throw new UsageError('--data-layer runs beside (c): keep c in --modes');
  return {
    durability: values['no-fsync'] ? 'no-fsync' : 'durable',
    modes: modes as ModeId[],
    cpuProf: values['cpu-prof'],
    durationS: intOption('duration', values.duration, 10, 1, 600),
    warmupS: intOption('warmup', values.warmup, 10, 0, 600),
    connections: intOption('connections', values.connections, 16, 1, 1000),
    rounds: intOption('rounds', values.rounds, 3, 1, 20),
    pool: intOption('pool', values.pool, 16, 1, 200),
    storedKeys: intOption('keys', values.keys, 1000, 1, 1_000_000),
    out: values.out,
    name: values.name === undefined ? undefined : values.name.replace(/[^A-Za-z0-9_-]/g, '-'),
    dataLayers: dataLayers ?? [],
  };
}

async function countCharges(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${SCHEMA}.charges`);
  return Number(rows[0]?.n ?? 0);
}

/**
 * The same mode's `--http-sql` ratios, from its JSON in `--out` (run it first, or after and
 * re-render): what each HTTP ratio would be with Node's CPU free.
 */
function sqlRatios(options: HttpBenchOptions): SqlRatios | null {
  const file = `latest-http-sql${durabilitySuffix(options.durability)}.json`;
  try {
    const { runs } = JSON.parse(fs.readFileSync(path.join(options.out, file), 'utf8')) as {
      runs: Array<{ mode: string; round: number; tps: number }>;
    };
    return { file, ratio: (num, den) => medianRoundRatio(runs, (r) => r.tps, num, den) };
  } catch {
    return null;
  }
}

/** One autocannon run of one mode; `round` 0 is the warm-up. */
async function load(
  port: number,
  mode: ModeId,
  round: number,
  durationS: number,
  connections: number,
  storedKeys: number,
  /** A layer's server: its keys are its own (its scope is too). */
  layer?: LayerName,
): Promise<autocannon.Result> {
  let n = 0;
  const spec = MODES[mode];
  const prefix = layer === undefined ? mode : `${mode}-${layer}`;
  const nextKey = (): string =>
    spec.keys === 'stored' ? `stored-${n++ % storedKeys}` : `${prefix}-${round}-${n++}`;
  return autocannon({
    url: `http://127.0.0.1:${port}`,
    connections,
    duration: durationS,
    requests: [
      {
        method: 'POST',
        path: spec.path,
        headers: { 'content-type': 'application/json' },
        body: BODY,
        ...(spec.keys === 'none'
          ? {}
          : {
              setupRequest: (request) => ({
                ...request,
                headers: { ...request.headers, 'idempotency-key': nextKey() },
              }),
            }),
      },
    ],
  });
}

export async function runHttpBench(argv: string[]): Promise<void> {
  const options = parse(argv);
  const command = `npm run bench -- ${argv.join(' ')}`;
  const loadAverageStart = os.loadavg();
  const services = await ensureServices(null);
  let server: ChildProcess | undefined;
  const layerServers: Array<{ layer: LayerName; port: number; child: ChildProcess }> = [];
  try {
    const url = services.endpoints.databaseUrl;
    const durability = await ensureDurability(
      url,
      options.durability,
      services.started.includes('postgres'),
    );
    await createBenchTables(url, SCHEMA);
    buildLibrary();
    const base = path.join(
      options.out,
      `latest-http${durabilitySuffix(options.durability)}${options.name ? `-${options.name}` : ''}`,
    );
    const profileDir = options.cpuProf ? path.resolve(options.out, 'profiles') : null;
    const started = await startServer(url, SCHEMA, options.pool, profileDir);
    server = started.child;
    // One server per data layer, `POST /eo` through it; started now, loaded in turn.
    for (const layer of options.dataLayers) {
      const layered = await startServer(url, SCHEMA, options.pool, null, layer);
      layerServers.push({ layer, ...layered });
    }
    const serverProcess = server;
    const { port } = started;
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    try {
      // The stored keys of (d): executed once each, before anything is measured.
      for (let i = 0; i < options.storedKeys; i++) {
        const response = await fetch(`http://127.0.0.1:${port}/eo`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'idempotency-key': `stored-${i}` },
          body: BODY,
        });
        if (response.status !== 201) throw new Error(`storing key ${i}: HTTP ${response.status}`);
        await response.arrayBuffer();
      }
      const modes = options.modes;
      console.log(`[bench] warm-up: ${options.warmupS} s per mode`);
      if (options.warmupS > 0) {
        for (const mode of modes)
          await load(port, mode, 0, options.warmupS, options.connections, options.storedKeys);
        for (const s of layerServers)
          await load(s.port, 'c', 0, options.warmupS, options.connections, 0, s.layer);
        // The warm-up's requests still in flight commit now, before anything is counted.
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
      const runs: ModeRun[] = [];
      const layerRuns: LayerRun[] = [];
      for (let round = 1; round <= options.rounds; round++) {
        for (const mode of modes) {
          const before = await countCharges(admin);
          const cpuBefore = cpuMs(serverProcess.pid);
          const result = await load(
            port,
            mode,
            round,
            options.durationS,
            options.connections,
            options.storedKeys,
          );
          const cpuAfter = cpuMs(serverProcess.pid);
          // Requests still in flight when autocannon stopped its clock finish now.
          await new Promise((resolve) => setTimeout(resolve, 1000));
          const rows = (await countCharges(admin)) - before;
          const ok = result['2xx'];
          const problems: string[] = [];
          if (result.non2xx > 0) problems.push(`${result.non2xx} non-2xx answers`);
          if (result.errors > 0) problems.push(`${result.errors} errors`);
          // Each first execution writes one charge (those in flight at the end too, up to
          // one per connection, uncounted by autocannon); a replay writes none.
          const replay = MODES[mode].keys === 'stored';
          if (replay ? rows !== 0 : rows < ok || rows > ok + options.connections)
            problems.push(`${rows} charges written for ${ok} answers`);
          const run: ModeRun = {
            mode,
            round,
            requests: ok,
            throughput: ok / options.durationS,
            p50Ms: result.latency.p50,
            p99Ms: result.latency.p99,
            serverCpuUsPerRequest:
              cpuBefore === null || cpuAfter === null || ok === 0
                ? null
                : ((cpuAfter - cpuBefore) * 1000) / ok,
            load1: os.loadavg()[0] ?? NaN,
            problems,
          };
          runs.push(run);
          console.log(
            `[bench] round ${round} (${mode}): ${Math.round(run.throughput)} req/s, p50 ${run.p50Ms} ms, ` +
              `p99 ${run.p99Ms} ms, server CPU ${Math.round(run.serverCpuUsPerRequest ?? NaN)} µs/req, load ${run.load1.toFixed(1)}${problems.length ? `  PROBLEMS: ${problems.join('; ')}` : ''}`,
          );
        }
        for (const s of layerServers) {
          const before = await countCharges(admin);
          const result = await load(
            s.port,
            'c',
            round,
            options.durationS,
            options.connections,
            0,
            s.layer,
          );
          await new Promise((resolve) => setTimeout(resolve, 1000));
          const rows = (await countCharges(admin)) - before;
          const ok = result['2xx'];
          const problems: string[] = [];
          if (result.non2xx > 0) problems.push(`${result.non2xx} non-2xx answers`);
          if (result.errors > 0) problems.push(`${result.errors} errors`);
          if (rows < ok || rows > ok + options.connections)
            problems.push(`${rows} charges written for ${ok} answers`);
          const run: LayerRun = {
            layer: s.layer,
            round,
            throughput: ok / options.durationS,
            p50Ms: result.latency.p50,
            p99Ms: result.latency.p99,
            problems,
          };
          layerRuns.push(run);
          console.log(
            `[bench] round ${round} (c, ${s.layer}): ${Math.round(run.throughput)} req/s, p50 ${run.p50Ms} ms, ` +
              `p99 ${run.p99Ms} ms, load ${(os.loadavg()[0] ?? NaN).toFixed(1)}${problems.length ? `  PROBLEMS: ${problems.join('; ')}` : ''}`,
          );
        }
      }
      const report: HttpReport = {
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
        options,
        runs,
        medians: Object.fromEntries(
          modes.map((m) => {
            const of = runs.filter((r) => r.mode === m);
            return [
              m,
              {
                throughput: median(of.map((r) => r.throughput)),
                p50Ms: median(of.map((r) => r.p50Ms)),
                p99Ms: median(of.map((r) => r.p99Ms)),
                serverCpuUsPerRequest: median(
                  of.flatMap((r) =>
                    r.serverCpuUsPerRequest === null ? [] : [r.serverCpuUsPerRequest],
                  ),
                ),
              },
            ];
          }),
        ) as HttpReport['medians'],
        ratio: (num, den) => medianRoundRatio(runs, (r) => r.throughput, num, den),
        cpuRatio: (num, den) =>
          medianRoundRatio(runs, (r) => r.serverCpuUsPerRequest ?? NaN, num, den),
      };
      const markdown = [
        renderHttpMarkdown(report, sqlRatios(options)),
        ...renderLayerTable(
          { unit: 'req/s', scenario: '(c) eo, first execution' },
          runs.filter((r) => r.mode === 'c'),
          layerRuns,
        ),
        '',
      ].join('\n');
      fs.mkdirSync(options.out, { recursive: true });
      const { ratio: _ratio, cpuRatio: _cpuRatio, ...json } = report;
      fs.writeFileSync(
        `${base}.json`,
        JSON.stringify(
          { ...json, layerRuns, labels: MODE_LABELS, targets: httpTargets(report) },
          null,
          2,
        ) + '\n',
      );
      fs.writeFileSync(`${base}.md`, markdown);
      console.log(`\n${markdown}\nwritten to ${base}.{md,json}`);
      if ([...runs, ...layerRuns].some((r) => r.problems.length > 0)) process.exitCode = 1;
    } finally {
      await admin.end();
    }
  } finally {
    for (const s of layerServers) {
      if (s.child.exitCode !== null) continue;
      const gone = new Promise((resolve) => s.child.once('exit', resolve));
      s.child.kill('SIGTERM');
      await gone;
    }
    if (server && server.exitCode === null) {
      const gone = new Promise((resolve) => server!.once('exit', resolve));
      server.kill('SIGTERM');
      await gone;
    }
    await services.stop();
  }
}
