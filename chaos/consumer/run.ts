import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { LAMBDA_MAX_RECEIVE_COUNT, type ChaosArgs } from './args.js';
import { sleep } from '../../src/sleep.js';
import { createBroker, type ChaosBroker } from './broker.js';
import type { Verdict } from './checker.js';
import {
  appliedCount,
  createChaosSchema,
  floatingOutside,
  hotTotal,
  orderViolations,
  readCounters,
  readFaultLog,
  type FaultLogRow,
} from './db.js';
import {
  accountFailovers,
  checkExcusing,
  failoverFindings,
  ledgerEffects,
  windowLosses,
} from '../failover/accounting.js';
import { Fleet } from './fleet.js';
import { HOT_PAIR_ALONE } from './fault-effects.js';
import { faultLabel } from './handler-faults.js';
import { Nemesis, planEvents } from './nemesis.js';
import { makePlan, type Plan } from './plan.js';
import type { IsolationLevel } from './protocol.js';
import { defaultRate, produce } from './producer.js';
import { Rng } from '../../kit/rng.js';
import type { ChaosServices } from '../../kit/services/private.js';
import { migrateKafkaOffsets } from 'effectively-once/kafka';
import type { HandlerFaultReport, RunResult } from './summary.js';
import {
  adminPool,
  dropSchemaAtClose,
  openRunScope,
  openRunServices,
} from '../../kit/run-scope.js';

const say = (line: string): void => console.error(`[chaos] ${line}`);

/** Handler failures before a poison message is dead-lettered. */
const MAX_ATTEMPTS = 4;

/**
 * One chaos run: services, schema, queues/topics; W workers; the producer and the
 * nemesis at the same time; then quiescence (every key applied, nothing left to
 * consume, poison dead-lettered, two checks in a row), a clean stop, and the checker.
 */
export async function runChaos(args: ChaosArgs): Promise<RunResult> {
  const started = Date.now();
  const rng = new Rng(args.seed);
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const plan = makePlan(rng, args.messages, args.duplicateRatio, args.poison, {
    count: args.handlerFaults,
    kinds: args.faultKinds,
  });
  if (args.control)
    say(`NEGATIVE CONTROL --control ${args.control}: this run is broken on purpose and must fail`);
  say(
    `run ${runId}: broker=${args.broker} messages=${args.messages} sends=${plan.sends.length} ` +
      `(duplicates ${plan.duplicates}, poison ${args.poison}) workers=${args.workers} concurrency=${args.concurrency}` +
      `${args.batch ? ` batch=${args.batch}` : ''}${args.pipeline ? ` pipeline=${args.pipeline}` : ''}` +
      ` kills=${args.kills} seed=${args.seed}` +
      (args.dataLayer === 'pg' ? '' : ` data_layer=${args.dataLayer}`) +
      (args.lambda ? ' lambda (redrive maxReceiveCount ' + LAMBDA_MAX_RECEIVE_COUNT + ')' : ''),
  );
  if (plan.faults.length > 0)
    say(
      `handler faults: ${plan.faults.length} keys (${countBy(plan.faults.map((f) => faultLabel(f.fault)))}); ` +
        `must end dead-lettered: ${plan.deadLetters.size} (poison ${plan.poisonKeys.length}); isolation ${args.isolation}`,
    );
  const logDir = path.join(os.tmpdir(), 'effectively-once-chaos', runId);
  fs.mkdirSync(logDir, { recursive: true });

  const scope = openRunScope(say, 'workers and services');
  const { abort } = scope;

  let success = false;
  try {
    const { services, pool } = await openRunServices(scope, say, args.broker, args);
    const shortfalls = impossibleFaults(args, services);
    const schema = `chaos_${runId}`;
    await createChaosSchema(pool, schema);
    if (args.broker === 'kafka' && args.offsets === 'postgres')
      await migrateKafkaOffsets(pool, { schema });
    dropSchemaAtClose(scope, say, pool, schema, () => success && !args.keep);
    const broker = await createBroker(args, services.brokerEndpoint, runId);
    scope.defer(() => broker.close(success && !args.keep));

    const fleet = new Fleet(
      (index) => ({
        index,
        databaseUrl: services.databaseUrl,
        schema,
        consumerName: `chaos-${args.broker}`,
        concurrency: args.concurrency,
        // Lambda: the consumer's verdict and the redrive policy's move agree on the count.
        maxAttempts: args.lambda ? LAMBDA_MAX_RECEIVE_COUNT : MAX_ATTEMPTS,
        broker: broker.worker,
        control: args.control,
        batch: args.batch,
        ...(args.lambda ? { lambda: true } : {}),
        isolation: isolationOf(args.isolation, index),
        ...(args.dataLayer === 'pg' ? {} : { dataLayer: args.dataLayer }),
        ...(args.broker === 'kafka'
          ? {
              keyConcurrency: args.keyConcurrency,
              pipeline: args.pipeline,
              offsets: args.offsets,
              kafkaClient: args.kafkaClient,
            }
          : {}),
      }),
      args.workers,
      rng,
      path.join(logDir, 'workers.log'),
    );
    say(`worker logs: ${path.join(logDir, 'workers.log')}`);
    fleet.start();
    scope.defer(() => fleet.stop(2000));

    const events = planEvents(
      rng,
      args.kills,
      services.canRestartPostgres ? args.pgRestarts : 0,
      services.canRestartBroker ? args.brokerRestarts : 0,
      args.failovers,
    );
    const nemesis = new Nemesis(events, fleet, services, rng, (line) => say(`nemesis: ${line}`));

    // Progress: keys applied so far (kept at the last known value while Postgres is down).
    let applied = 0;
    const poller = (async () => {
      while (!abort.signal.aborted) {
        applied = (await appliedCount(pool, schema)) ?? applied;
        await sleep(250);
      }
    })();
    const progress = (): number => Math.min(1, applied / args.messages);

    const deadline = started + args.timeoutMs;
    const timer = setTimeout(() => abort.abort(), args.timeoutMs);
    const rate = args.rate ?? defaultRate(args, plan.sends.length);
    say(`producer: ${rate > 0 ? `${rate} sends/s` : 'unpaced'}`);
    const producing = produce(broker, plan.sends, rate, abort.signal).then((r) => {
      say(
        `producer: ${plan.sends.length} sends done in ${((Date.now() - started) / 1000).toFixed(1)} s${r.resent > 0 ? ` (${r.resent} re-sent after errors)` : ''}`,
      );
      return r;
    });
    const faults = nemesis.run(progress, abort.signal);

    const quiescent = await waitForQuiescence({
      broker,
      deadLetters: plan.deadLetters.size,
      messages: args.messages,
      applied: () => applied,
      fleet,
      producing,
      faults,
      deadline,
      signal: abort.signal,
    });
    clearTimeout(timer);
    say(
      quiescent
        ? `quiescent after ${((Date.now() - started) / 1000).toFixed(1)} s; stopping workers`
        : 'timed out before quiescence; stopping workers',
    );
    abort.abort();
    await fleet.stop();
    await poller;

    const account =
      services.cluster &&
      (await accountFailovers(
        services.cluster,
        pool,
        ledgerEffects(schema),
        nemesis.report.failovers,
      ));
    const excuse = account && ((lost: string[]) => windowLosses(account, lost));
    const { verdict, excused } = await finalCheck(
      pool,
      schema,
      plan,
      broker,
      quiescent,
      checksOrder(args),
      excuse,
    );
    if (account) failoverFindings(account, args.failovers, verdict.problems, shortfalls, say);
    const faultReport = await handlerFaultReport(pool, schema, plan, fleet, shortfalls);
    const report = nemesis.report;
    if (report.kills < args.kills)
      shortfalls.push(`kills: ${report.kills} of ${args.kills} happened`);
    if (services.canRestartPostgres && report.pgRestarts < args.pgRestarts)
      shortfalls.push(`Postgres restarts: ${report.pgRestarts} of ${args.pgRestarts}`);
    if (services.canRestartBroker && report.brokerRestarts < args.brokerRestarts)
      shortfalls.push(`broker restarts: ${report.brokerRestarts} of ${args.brokerRestarts}`);
    say(
      `kills by mode: ${JSON.stringify(report.killsByMode)}${report.fallbacks > 0 ? `, ${report.fallbacks} armed point(s) not reached in time (killed from outside)` : ''}; worker processes started: ${fleet.spawned}${otherExits(fleet)}`,
    );
    for (const line of verdict.problems) say(`PROBLEM: ${line}`);
    for (const line of shortfalls) say(`note: ${line}`);
    const result: RunResult = {
      args,
      duplicatesSent: plan.duplicates,
      nemesis: report,
      verdict,
      handlerFaults: faultReport,
      ...(account && {
        failover: {
          account,
          windowLost: excused,
          commitUnknownRetries: fleet.events.failed.get('EO_COMMIT_UNKNOWN') ?? 0,
        },
      }),
      timedOut: !quiescent,
      shortfalls,
      durationMs: Date.now() - started,
    };
    success =
      quiescent &&
      verdict.problems.length === 0 &&
      verdict.doubles === 0 &&
      verdict.lost === excused;
    say(`took ${(result.durationMs / 1000).toFixed(1)} s`);
    // A negative control is expected to fail: its logs are not worth keeping.
    if (success || args.control) fs.rmSync(logDir, { recursive: true, force: true });
    else say(`worker logs kept in ${logDir}`);
    return result;
  } finally {
    await scope.close();
  }
}

/** Worker exits that were not SIGKILLs (e.g. a start that failed while Postgres was down). */
function otherExits(fleet: Fleet): string {
  const other = fleet.exits.filter(
    (e) => e.signal !== 'SIGKILL' && !(e.code === 0 && e.signal === null),
  );
  return other.length === 0
    ? ''
    : `; other worker exits: ${other.map((e) => `code ${e.code ?? e.signal}`).join(', ')}`;
}

/** Restarts asked for that cannot happen because the service was given from outside. */
function impossibleFaults(args: ChaosArgs, services: ChaosServices): string[] {
  if (args.pgRestarts > 0 && !services.canRestartPostgres) {
    say(
      'note: DATABASE_URL was given, so Postgres restarts are impossible in this run (pg_restarts=0)',
    );
  }
  if (args.brokerRestarts > 0 && !services.canRestartBroker) {
    say(
      'note: KAFKA_BROKERS / RABBITMQ_URL was given, so broker restarts are impossible in this run (broker_restarts=0)',
    );
  }
  return [];
}

interface QuiescenceInput {
  broker: ChaosBroker;
  messages: number;
  /** Keys that must end in the dead-letter target (poison, permanent handler faults). */
  deadLetters: number;
  applied: () => number;
  fleet: Fleet;
  producing: Promise<unknown>;
  faults: Promise<void>;
  deadline: number;
  signal: AbortSignal;
}

/**
 * True once the producer and the nemesis are done and nothing is left to consume (SQS
 * queue empty, in flight and delayed included; Kafka lag 0): two checks in a row, a
 * second apart, when every key is applied and every expected dead letter is there;
 * five when some are missing (then nothing can bring them any more: the adapters
 * write a dead letter before they delete the message or commit its offset, so a key
 * missing from both the effects and the dead letters of a drained run was acked
 * without either: lost). False at the deadline.
 */
async function waitForQuiescence(q: QuiescenceInput): Promise<boolean> {
  let producerDone = false;
  let faultsDone = false;
  void q.producing.then(() => (producerDone = true));
  void q.faults.then(() => (faultsDone = true));
  let stable = 0;
  let lastReport = 0;
  while (Date.now() < q.deadline && !q.signal.aborted) {
    await sleep(1000);
    let drained = false;
    let dead = -1;
    if (producerDone && faultsDone) {
      drained = await q.broker.drained().catch(() => false);
      dead = await q.broker.deadLetterCount().catch(() => -1);
    }
    stable = drained ? stable + 1 : 0;
    const complete = q.applied() >= q.messages && dead >= q.deadLetters;
    if (stable >= (complete ? 2 : 5)) return true;
    if (Date.now() - lastReport > 5000) {
      lastReport = Date.now();
      say(
        `applied ${q.applied()}/${q.messages}, producer ${producerDone ? 'done' : 'sending'}, nemesis ${faultsDone ? 'done' : 'active'}, ` +
          `workers ready ${q.fleet.readySlots().length}${dead >= 0 ? `, dead letters ${dead}/${q.deadLetters}, drained ${drained}` : ''}`,
      );
    }
  }
  return false;
}

/** Kafka with one ordered stream per partition: the order of its effects is checked. */
function checksOrder(args: ChaosArgs): boolean {
  return args.broker === 'kafka' && args.keyConcurrency === 1;
}

/**
 * The checker's verdict. `excuse` names the lost keys the run accepts (an async
 * failover's window): they count in `lost` but raise no problem; `excused` says how many.
 */
async function finalCheck(
  pool: ReturnType<typeof adminPool>,
  schema: string,
  plan: Plan,
  broker: ChaosBroker,
  quiescent: boolean,
  order: boolean,
  excuse?: (lostKeys: string[]) => Set<string>,
): Promise<{ verdict: Verdict; excused: number }> {
  for (let attempt = 1; ; attempt++) {
    try {
      const { counters, ledger, ledgerRows } = await readCounters(pool, schema);
      const deadLetters = await broker.deadLetters();
      const state = {
        counters,
        ledger,
        ledgerRows,
        deadLetters,
        hotTotal: await hotTotal(pool, schema),
        quiescent,
        order: order ? await orderViolations(pool, schema) : undefined,
        floatingOutside: await floatingOutside(pool, schema),
        uncodedDeadLetters: !broker.codedDeadLetters,
      };
      return checkExcusing(plan, state, excuse);
    } catch (error) {
      if (attempt >= 5) throw error;
      say(`final check failed (${String(error)}), retrying`);
      await sleep(2000);
    }
  }
}

/** Worker slot `index`'s isolation level (`mixed`: even slots SERIALIZABLE, odd REPEATABLE READ). */
function isolationOf(isolation: ChaosArgs['isolation'], index: number): IsolationLevel | undefined {
  if (isolation === 'default') return undefined;
  if (isolation === 'mixed') return index % 2 === 0 ? 'serializable' : 'repeatable read';
  return isolation;
}

function countBy(labels: string[]): string {
  const counts = new Map<string, number>();
  for (const l of labels) counts.set(l, (counts.get(l) ?? 0) + 1);
  return [...counts].map(([l, n]) => `${l} ${n}`).join(', ');
}

function codes(counts: Map<string, number>): string {
  return counts.size === 0
    ? 'none'
    : [...counts]
        .sort((a, b) => b[1] - a[1])
        .map(([code, n]) => `${code} ${n}`)
        .join(', ');
}

/**
 * What the handler faults did: fires and serialization failures from the fault log,
 * and what the library made of them (the workers' failed / dead-lettered events by
 * code). A planned fault kind that never fired is a shortfall; so is a run with hot
 * pairs and no serialization failure at all (the contention did not happen).
 */
async function handlerFaultReport(
  pool: ReturnType<typeof adminPool>,
  schema: string,
  plan: Plan,
  fleet: Fleet,
  shortfalls: string[],
): Promise<HandlerFaultReport> {
  let rows: FaultLogRow[] = [];
  try {
    rows = await readFaultLog(pool, schema);
  } catch (error) {
    say(`fault log unreadable: ${String(error)}`);
  }
  const fired = rows.filter((r) => r.code === null);
  const alone = rows.filter((r) => r.kind === HOT_PAIR_ALONE);
  const contention = rows.filter((r) => r.code !== null && r.kind !== HOT_PAIR_ALONE);
  const report: HandlerFaultReport = {
    planned: plan.faults.length,
    fired: fired.reduce((sum, r) => sum + r.n, 0),
    serializationFailures: contention.reduce((sum, r) => sum + r.n, 0),
  };
  if (plan.faults.length === 0) return report;
  say(
    `handler faults fired: ${fired.map((r) => `${r.kind} ${r.n} (${r.keys} keys)`).join(', ') || 'none'}; ` +
      `serialization failures seen by hot handlers: ${contention.map((r) => `${r.kind} ${r.code} ${r.n}`).join(', ') || 'none'}` +
      `${alone.length > 0 ? `; hot messages whose partner did not come: ${alone.map((r) => `${r.keys} at ${r.code}`).join(', ')}` : ''}`,
  );
  say(`workers' failed events by code: ${codes(fleet.events.failed)}`);
  say(`workers' dead-lettered events by code: ${codes(fleet.events.deadLettered)}`);
  const firedKinds = new Set(fired.map((r) => r.kind));
  const plannedKinds = new Set(
    plan.faults.filter((f) => f.fault.kind !== 'serialization').map((f) => faultLabel(f.fault)),
  );
  for (const kind of plannedKinds)
    if (!firedKinds.has(kind)) shortfalls.push(`handler fault ${kind} planned but never fired`);
  if (plan.hotKeys > 0 && report.serializationFailures === 0)
    shortfalls.push('hot pairs planned but no serialization failure or deadlock happened');
  return report;
}
