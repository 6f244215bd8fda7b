import type pg from 'pg';
import type { BrokerDriver } from './broker.js';
import type { RunContext } from './context.js';
import { prepareInMemory, runDbBatchCeiling, runDbCeiling } from './db-ceiling.js';
import { createPool, resetTables, summarizeEffects, type EffectSummary } from './db.js';
import { Drain } from './drain.js';
import { historyOlderThan, resetHistory } from './history.js';
import { PRUNE_WHILE_CONSUMING } from './pruning.js';
import { collectGarbage, mb, RssSampler } from './memory.js';
import { MemorySampler, type MemorySeries } from './memory-series.js';
import { percentile } from './stats.js';
import type { RunResult, ScenarioTask } from './protocol.js';
import { SCENARIOS } from './scenarios.js';
import { openDataLayer, type OpenedLayer } from '../kit/data-layers/index.js';

async function driverFor(task: ScenarioTask): Promise<BrokerDriver> {
  if (task.broker === 'sqs') {
    const { sqsDriver } = await import('./sqs/driver.js');
    return sqsDriver(need(task.endpoints.sqsEndpoint, 'SQS endpoint'));
  }
  if (task.broker === 'rabbitmq') {
    const { rabbitmqDriver } = await import('./rabbitmq/driver.js');
    return rabbitmqDriver(need(task.endpoints.rabbitmqUrl, 'RabbitMQ URL'));
  }
  const { kafkaDriver } = await import('./kafka/driver.js');
  return kafkaDriver(
    need(task.endpoints.kafkaBrokers, 'Kafka brokers'),
    task.partitions,
    task.keyConcurrency,
    task.kafkaClient ?? 'kafkajs',
  );
}

/** Opens every connection of the pool up front: connection setup is not part of any scenario's cost. */
async function warmPool(pool: pg.Pool, size: number): Promise<void> {
  const clients = await Promise.all(Array.from({ length: size }, () => pool.connect()));
  for (const client of clients) client.release();
}

/** Opens `size` of the layer's connections up front, as {@link warmPool} does for pg's. */
async function warmLayer(data: OpenedLayer, size: number): Promise<void> {
  const settings = { timeoutMs: 0, acquireTimeoutMs: 30_000 };
  // Each transaction holds its connection until all have one: `size` distinct connections.
  let held = 0;
  let release!: () => void;
  const all = new Promise<void>((resolve) => (release = resolve));
  await Promise.all(
    Array.from({ length: size }, () =>
      data.layer.transaction(settings, async (tx) => {
        await data.exec(tx, 'SELECT 1');
        if (++held === size) release();
        await all;
      }),
    ),
  );
}

/**
 * One scenario run, in a process of its own (so peak RSS is the scenario's):
 * reset the tables (and the dedup history to its loaded state), pre-fill the broker,
 * drain it, then check the effect.
 */
export async function runScenario(task: ScenarioTask): Promise<RunResult> {
  const info = SCENARIOS[task.scenario];
  const rssBeforePrefill = process.memoryUsage().rss;
  const admin = createPool(task.endpoints.databaseUrl, 1);
  const pool = createPool(task.endpoints.databaseUrl, task.concurrency);
  let driver: BrokerDriver | undefined;
  let data: OpenedLayer | undefined;
  try {
    await resetTables(admin);
    if (task.dedupPreload > 0) await resetHistory(admin);
    let inMemory: ReturnType<typeof prepareInMemory> | undefined;
    if (info.usesBroker) {
      driver = await driverFor(task);
      await driver.prepare(`${task.scenario}${task.round}`, task.messages);
    } else {
      inMemory = prepareInMemory(task.messages);
    }
    await warmPool(pool, task.concurrency);
    if (task.dataLayer !== undefined) {
      data = await openDataLayer(task.dataLayer, task.endpoints.databaseUrl, task.concurrency);
      await warmLayer(data, task.concurrency);
    }
    collectGarbage();

    const drain = new Drain(task.messages);
    const ctx: RunContext = {
      pool,
      dedupSchema: task.dedupSchema,
      pruning: task.pruning,
      messages: task.messages,
      concurrency: task.concurrency,
      consumerConcurrency: task.consumerConcurrency,
      batchSize: task.batchSize,
      inboxBatch: task.inboxBatch,
      drain,
      notes: {},
      ...(data === undefined ? {} : { dataLayer: data }),
    };
    const rss = new RssSampler();
    const series = task.memoryRun ? new MemorySampler(drain, mb(rssBeforePrefill)) : undefined;
    rss.start();
    series?.start();
    let peak: number;
    let memory: MemorySeries | undefined;
    try {
      if (driver !== undefined)
        await driver.run(task.scenario as Exclude<typeof task.scenario, 'e' | 'g'>, ctx);
      else if (task.scenario === 'g') await runDbBatchCeiling(ctx, inMemory ?? []);
      else await runDbCeiling(ctx, inMemory ?? []);
    } finally {
      peak = rss.stop();
      memory = series?.stop();
    }

    const effects = await summarizeEffects(admin, task.dedupSchema);
    if (task.pruning) {
      // What the pruner had not reached yet: 0 means it ran dry, and part of the drain went unpruned.
      const old = await historyOlderThan(admin, PRUNE_WHILE_CONSUMING.olderThanMs);
      ctx.notes['pruneBacklogLeft'] = old - (ctx.notes['prunedRows'] ?? 0);
    }
    const remaining = driver === undefined ? null : await driver.remaining();
    const drainMs = drain.elapsedMs;
    // Is this process the bottleneck? CPU near 100 % of a core or ELU near 1 says yes;
    // low values say it is waiting on round trips (database, broker).
    ctx.notes['nodeCpuPct'] = (drain.cpuMs / drainMs) * 100;
    ctx.notes['eventLoopUtilization'] = drain.eventLoopUtilization;
    const noDb = info.expect === 'no-effect';
    return {
      scenario: task.scenario,
      round: task.round,
      dedupPreload: task.dedupPreload,
      pruning: task.pruning,
      ...(task.dataLayer === undefined ? {} : { dataLayer: task.dataLayer }),
      messages: task.messages,
      drainMs,
      throughput: (task.messages / drainMs) * 1000,
      p50Ms: noDb ? percentile(drain.latencies, 0.5) : effects.p50Ms,
      p99Ms: noDb ? percentile(drain.latencies, 0.99) : effects.p99Ms,
      peakRssMb: mb(peak),
      startRssMb: mb(rss.startRss),
      repeats: drain.repeats,
      effects,
      remaining,
      notes: ctx.notes,
      problems: check(task, effects, remaining),
      ...(memory === undefined ? {} : { memory }),
    };
  } finally {
    await driver?.close();
    await data?.close();
    await pool.end();
    await admin.end();
  }
}

/** The effect count each kind of scenario must leave; anything else is a bug the bench reports. */
function check(task: ScenarioTask, effects: EffectSummary, remaining: number | null): string[] {
  const n = task.messages;
  const problems: string[] = [];
  const expect = SCENARIOS[task.scenario].expect;
  if (expect === 'exactly-once' && (effects.rows !== n || effects.distinct !== n)) {
    problems.push(
      `effect rows ${effects.rows} (distinct ${effects.distinct}), expected exactly ${n}`,
    );
  }
  if (expect === 'at-least-once' && effects.distinct !== n) {
    problems.push(`effect covers ${effects.distinct} distinct messages, expected ${n}`);
  }
  if (expect === 'no-effect' && effects.rows !== 0)
    problems.push(`effect rows ${effects.rows}, expected none`);
  if (['b', 'c', 'e', 'g'].includes(task.scenario) && effects.dedupRows !== n) {
    problems.push(`processed_messages has ${effects.dedupRows} claims, expected ${n}`);
  }
  if (remaining !== null && remaining !== 0)
    problems.push(`${remaining} messages left on the broker`);
  return problems;
}

function need(value: string | undefined, what: string): string {
  if (value === undefined || value === '')
    throw new Error(`bench: no ${what} given to the scenario process`);
  return value;
}
