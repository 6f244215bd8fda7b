import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { fileURLToPath } from 'node:url';
import { sleep } from '../../src/sleep.js';
import { FaultProxy } from '../../kit/fault-proxy.js';
import { Rng } from '../../kit/rng.js';
import {
  adminPool,
  dropSchemaAtClose,
  openRunScope,
  openRunServices,
} from '../../kit/run-scope.js';
import { replayAll, runPayments, type PaymentLog } from '../http/clients.js';
import { DatabaseNemesis } from '../http/db-nemesis.js';
import { planKills, ServerSupervisor } from '../http/server.js';
import { sendAbandoned } from './abandoned.js';
import type { StepsChaosArgs } from './args.js';
import { checkSteps } from './checker.js';
import { finishFlows } from './completer.js';
import { createStepsSchema, effectsDigest, readEffects } from './db.js';
import { countUnfinished, readFlows, readScope } from './flows-table.js';
import { operationCall, planOperations, type Operation } from './plan.js';
import { startChaosProvider } from './provider.js';
import type { StepsRunResult } from './summary.js';

const say = (line: string): void => console.error(`[chaos] ${line}`);

/**
 * Boundaries (kill points) an operation passes, a little under the average: 'in-order',
 * 'order', 'charge', 'record' (two for a decline, none for an abandoned one that never
 * arrived, more for a resumed one), so every planned kill and restart can happen.
 */
const BOUNDARIES_PER_OPERATION = 3;
/** The flow's provider call timeout; a `timeout` fault holds the answer longer. */
const CALL_TIMEOUT_MS = 1000;

/**
 * One steps chaos run: private Postgres; the test provider in this process behind a
 * proxy that fires the planned provider faults; the steps server (child.ts: the flow
 * behind Express or Fastify, its completer running) SIGKILLed and restarted by the HTTP
 * target's supervisor, behind a fault proxy; the retrying callers of the HTTP target and
 * the abandoned operations' one-shot clients; Postgres crash-restarts. Then a final
 * completer pass, the verdict over the tables and the provider's record, each operation
 * with a key row replayed once more directly, and both read again.
 */
export async function runStepsChaos(args: StepsChaosArgs): Promise<StepsRunResult> {
  const started = Date.now();
  const rng = new Rng(args.seed);
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const ops = planOperations(rng, args);
  const abandonedOps = ops.filter((o) => o.abandoned);
  const calls = ops.filter((o) => !o.abandoned).map(operationCall);
  const duplicatesSent = calls.filter((c) => c.duplicated).length;
  const boundaries = Math.floor(ops.length * BOUNDARIES_PER_OPERATION);
  const kills = planKills(rng, args.kills, boundaries);
  say(
    `run ${runId}: target=steps framework=${args.framework} operations=${args.operations} ` +
      `(abandoned ${abandonedOps.length}, duplicated ${duplicatesSent}, declines ${args.declines}, ` +
      `provider faults ${args.providerFaults}) clients=${args.clients} kills=${args.kills} ` +
      `pg_restarts=${args.pgRestarts} lease=${args.leaseMs} ms proxy drop=${args.drop} ` +
      `reset=${args.reset} delay=${args.delay} seed=${args.seed}`,
  );

  const scope = openRunScope(say, 'the server, the provider and services');
  const { abort } = scope;
  setMaxListeners(args.clients * 2 + 16, abort.signal);
  let success = false;
  try {
    const { services, pool } = await openRunServices(scope, say, null, {
      failovers: 0,
      replication: 'sync',
    });
    if (args.pgRestarts > 0 && !services.canRestartPostgres)
      say('note: DATABASE_URL was given, so Postgres restarts are impossible (pg_restarts=0)');
    const schema = `chaos_steps_${runId}`;
    await createStepsSchema(pool, schema);
    dropSchemaAtClose(scope, say, pool, schema, () => success && !args.keep);

    const provider = await startChaosProvider({ ops, holdMs: CALL_TIMEOUT_MS + 500 });
    scope.defer(() => provider.close());
    const supervisor = new ServerSupervisor({
      framework: args.framework,
      // The flow's steps write through pg (the library's pool); data layers are another target's.
      dataLayer: 'pg',
      databaseUrl: services.databaseUrl,
      schema,
      kills,
      faultPort: 0,
      rng,
      log: (line) => say(`nemesis: ${line}`),
      entry: fileURLToPath(new URL('./child.ts', import.meta.url)),
      env: {
        EO_STEPS_PROVIDER_URL: provider.url,
        EO_STEPS_LEASE_MS: String(args.leaseMs),
        EO_STEPS_CALL_TIMEOUT_MS: String(CALL_TIMEOUT_MS),
      },
    });
    const port = await supervisor.start();
    scope.defer(() => supervisor.stop());
    const proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port },
      faults: { drop: args.drop, reset: args.reset, delay: args.delay },
      seed: args.seed,
      delayMs: args.attemptTimeoutMs + 500,
      // Bounded, so every operation can finish; the server's faults are not bounded.
      maxFaultsPerKey: 4,
    });
    scope.defer(() => proxy.close());
    say(`server on 127.0.0.1:${port}, callers through ${proxy.url}; provider at ${provider.url}`);

    const database = new DatabaseNemesis(
      rng,
      { payments: boundaries, pgTerminations: 0, pgRestarts: args.pgRestarts, failovers: 0 },
      services,
      pool,
      () => supervisor.committed(),
      say,
    );
    const dbFaults = database.run(abort.signal);
    let settled = 0;
    const progress = setInterval(
      () =>
        say(
          `answered ${settled}/${calls.length}, boundaries ${supervisor.committed()}, ` +
            `kills ${supervisor.killed['after-commit'] + supervisor.killed.random}/${args.kills}, ` +
            `provider ${JSON.stringify(provider.counts())}, proxy ${JSON.stringify(proxy.counts())}`,
        ),
      5000,
    );
    const deadline = started + args.timeoutMs;
    const callers = {
      urls: { payments: proxy.url, faults: proxy.url },
      clients: args.clients,
      attemptTimeoutMs: args.attemptTimeoutMs,
      deadline,
      signal: abort.signal,
      onSettled: () => settled++,
    };
    // The provider knows operations by their derived keys: the first operation alone
    // (one the plan leaves unfaulted), then its key row's scope derives all of them.
    const probe = calls.find((c) => isPlain(ops, c.key)) ?? calls[0];
    const logs = probe ? await runPayments([probe], callers) : new Map<string, PaymentLog>();
    const scopeOf = probe && (await readScope(pool, schema, probe.key));
    if (scopeOf === undefined) throw new Error('the first operation left no key row: no scope');
    provider.learn(scopeOf, schema);
    say(`the door's scope: ${JSON.stringify(scopeOf)}`);
    const [rest, abandoned] = await Promise.all([
      runPayments(
        calls.filter((c) => c !== probe),
        callers,
      ),
      sendAbandoned(abandonedOps, {
        url: proxy.url,
        concurrency: Math.max(1, Math.round(args.clients * args.abandonRatio)),
        timeoutMs: args.attemptTimeoutMs,
        signal: abort.signal,
      }),
    ]).finally(() => clearInterval(progress));
    for (const [key, log] of rest) logs.set(key, log);
    say(`operations sent and answered after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await Promise.race([supervisor.killsDone(), sleep(Math.max(0, deadline - Date.now()))]);
    abort.abort();
    await dbFaults;

    // What no client came back for: the completer's, in the server and then here.
    const lookups = adminPool(services.databaseUrl);
    scope.defer(() => lookups.end());
    const pending = await countUnfinished(lookups, schema);
    say(`unfinished flows when the callers were done: ${pending}; final completer pass`);
    const finalPass = await finishFlows({
      databaseUrl: services.databaseUrl,
      schema,
      providerUrl: provider.directUrl,
      leaseMs: args.leaseMs,
      callTimeoutMs: CALL_TIMEOUT_MS,
      deadline: Date.now() + 60_000 + args.leaseMs * 10,
      countUnfinished: () => countUnfinished(lookups, schema),
      say,
    });

    // The servers' own completers (their `completer` lines) and the final pass.
    const inServers = supervisor.tally('completer');
    say(`completers finished ${inServers} flow(s) in the servers, ${finalPass} in the final pass`);
    const effects = await readEffects(pool, schema);
    const charges = provider.charges();
    const flows = await readFlows(pool, schema);
    const digest = await effectsDigest(pool, schema);
    // The last incarnation is up: each finished operation once more, straight to it (an
    // unfinished one is counted as such; resuming it here would hide what was left).
    const rows = new Set(flows.filter((f) => f.status !== null).map((f) => f.key));
    const replayed = await replayAll(
      ops.filter((o) => rows.has(o.key)).map(operationCall),
      { payments: `http://127.0.0.1:${port}`, faults: `http://127.0.0.1:${port}` },
      say,
    );
    const verdict = checkSteps({
      ops,
      logs,
      abandoned,
      effects,
      charges,
      chargesAfter: provider.charges(),
      flows,
      replayed,
      effectsUnchanged: digest === (await effectsDigest(pool, schema)),
    });
    const shortfalls: string[] = [];
    const killCount = supervisor.killed['after-commit'] + supervisor.killed.random;
    if (killCount < args.kills) shortfalls.push(`kills: ${killCount} of ${args.kills} happened`);
    if (services.canRestartPostgres && database.restarts < args.pgRestarts)
      shortfalls.push(`Postgres restarts: ${database.restarts} of ${args.pgRestarts}`);
    const fired = provider.faultsFired();
    const planned = ops.filter((o) => o.providerFault !== undefined && !o.abandoned).length;
    if (fired.operations < Math.min(planned, 1))
      shortfalls.push(`provider faults: none of ${planned} fired`);
    say(
      `kills by mode: after a boundary ${supervisor.killed['after-commit']}, random ${supervisor.killed.random}` +
        `${supervisor.killed.fallbacks > 0 ? ` (${supervisor.killed.fallbacks} armed, killed from outside)` : ''}; ` +
        `server processes started: ${supervisor.spawned} (${supervisor.failedStarts} failed starts); ` +
        `provider faults fired ${fired.calls} times on ${fired.operations} operations ${JSON.stringify(fired.byKind)}`,
    );
    if (supervisor.crashes > 0)
      say(`note: the server crashed ${supervisor.crashes} time(s) on its own (stderr above)`);
    const unknownKeys = provider.unknownKeys();
    if (unknownKeys > 0)
      verdict.problems.push(`provider requests with a key no operation derives: ${unknownKeys}`);
    for (const line of verdict.problems) say(`PROBLEM: ${line}`);
    for (const line of shortfalls) say(`note: ${line}`);
    const result: StepsRunResult = {
      args,
      duplicatesSent,
      abandoned: abandonedOps.length,
      kills: killCount,
      pgRestarts: database.restarts,
      serverCrashes: supervisor.crashes,
      proxy: proxy.counts(),
      providerCalls: provider.counts().requests,
      providerFaultsFired: fired.calls,
      unfinishedBeforeCompleter: pending,
      completerFinished: inServers + finalPass,
      verdict,
      timedOut: verdict.unanswered > 0,
      shortfalls,
      durationMs: Date.now() - started,
    };
    success =
      !result.timedOut &&
      verdict.problems.length === 0 &&
      verdict.doubles + verdict.lost + verdict.unfinished + verdict.mismatched === 0;
    say(`took ${(result.durationMs / 1000).toFixed(1)} s`);
    return result;
  } finally {
    await scope.close();
  }
}

/** Whether `key`'s operation is one the plan neither declines nor faults. */
function isPlain(ops: Operation[], key: string): boolean {
  const op = ops.find((o) => o.key === key);
  return op !== undefined && op.body.card === 'ok' && op.providerFault === undefined;
}
