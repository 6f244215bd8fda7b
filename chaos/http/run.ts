import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { sleep } from '../../src/sleep.js';
import { FaultProxy } from '../../kit/fault-proxy.js';
import { freePorts } from '../../kit/services/ports.js';
import { Rng } from '../../kit/rng.js';
import {
  adminPool,
  dropSchemaAtClose,
  openRunScope,
  openRunServices,
} from '../../kit/run-scope.js';
import type { HttpChaosArgs } from './args.js';
import { accountFailovers, failoverFindings, windowLosses } from '../failover/accounting.js';
import { checkHttp, httpEffects, readCharges, readStored, type ChargeRow } from './checker.js';
import { paymentCall, planPayments, replayAll, runPayments, type Payment } from './clients.js';
import { DatabaseNemesis } from './db-nemesis.js';
import { EarlyAnswers } from './early.js';
import { checkFaultOps } from './fault-checker.js';
import { createHttpChaosSchema, readEffects, readFired, readTimings } from './fault-db.js';
import { interleave, planFaultOps } from './fault-plan.js';
import { planKills, ServerSupervisor } from './server.js';
import type { HttpRunResult } from './summary.js';

const say = (line: string): void => console.error(`[chaos] ${line}`);

/**
 * One HTTP chaos run: private Postgres; the payment API and the handler-fault routes
 * (child.ts) in a child process behind two fault-injecting TCP proxies; N logical
 * payments and F faulty operations, each with one idempotency key, sent by
 * idempotentFetch callers through the proxies while the server is SIGKILLed and
 * restarted and its Postgres connections are terminated; the proxies hold every answer
 * until the early-answer check looked at it. Then the checkers read the effects, every
 * operation is replayed once more directly, and the effects are read again.
 */
export async function runHttpChaos(args: HttpChaosArgs): Promise<HttpRunResult> {
  const started = Date.now();
  const rng = new Rng(args.seed);
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const payments = planPayments(rng, args.payments, args.duplicateRatio);
  const kills = planKills(rng, args.kills, args.payments);
  const ops = planFaultOps(rng, args.handlerFaults, args.faultKinds, args.duplicateRatio);
  const calls = interleave(rng, payments.map(paymentCall), ops);
  const duplicatesSent = calls.filter((c) => c.duplicated).length;
  say(
    `run ${runId}: target=http framework=${args.framework} payments=${args.payments} ` +
      `handler_faults=${ops.length} (${args.faultKinds.join(',')}) ` +
      `(duplicated ${duplicatesSent}) clients=${args.clients} kills=${args.kills} ` +
      `pg_terminations=${args.pgTerminations} pg_restarts=${args.pgRestarts} ` +
      `proxy drop=${args.drop} reset=${args.reset} delay=${args.delay} seed=${args.seed}`,
  );

  const scope = openRunScope(say, 'the server and services');
  const { abort } = scope;
  // Every caller's idempotentFetch listens on it.
  setMaxListeners(args.clients * 2 + 16, abort.signal);

  let success = false;
  try {
    const { services, pool } = await openRunServices(scope, say, null, args);
    const shortfalls: string[] = [];
    if (args.pgRestarts > 0 && !services.canRestartPostgres)
      say('note: DATABASE_URL was given, so Postgres restarts are impossible (pg_restarts=0)');
    const schema = `chaos_http_${runId}`;
    await createHttpChaosSchema(pool, schema);
    dropSchemaAtClose(scope, say, pool, schema, () => success && !args.keep);

    const [faultPort = 0] = ops.length > 0 ? await freePorts(1) : [];
    const supervisor = new ServerSupervisor({
      framework: args.framework,
      dataLayer: args.dataLayer,
      databaseUrl: services.databaseUrl,
      schema,
      kills,
      faultPort,
      rng,
      log: (line) => say(`nemesis: ${line}`),
    });
    const port = await supervisor.start();
    scope.defer(() => supervisor.stop());
    const lookups = adminPool(services.databaseUrl);
    scope.defer(() => lookups.end());
    const early = new EarlyAnswers(lookups, schema);
    const proxyOptions = {
      faults: { drop: args.drop, reset: args.reset, delay: args.delay },
      seed: args.seed,
      delayMs: args.attemptTimeoutMs + 500,
      // Bounded, so every operation can finish; the server's faults are not bounded.
      maxFaultsPerKey: 4,
    };
    const proxy = await FaultProxy.start({
      ...proxyOptions,
      target: { host: '127.0.0.1', port },
      beforeAnswer: early.hook('payments'),
    });
    scope.defer(() => proxy.close());
    // Keyed by operation: the two operations of a long-names pair share their key.
    const faultProxy =
      faultPort > 0
        ? await FaultProxy.start({
            ...proxyOptions,
            target: { host: '127.0.0.1', port: faultPort },
            keyHeader: 'x-chaos-op',
            beforeAnswer: early.hook('faults'),
          })
        : undefined;
    if (faultProxy) scope.defer(() => faultProxy.close());
    say(`server on 127.0.0.1:${port}, callers through the proxy at ${proxy.url}`);
    if (faultProxy) say(`fault routes on 127.0.0.1:${faultPort}, through ${faultProxy.url}`);

    const database = new DatabaseNemesis(
      rng,
      args,
      services,
      pool,
      () => supervisor.committed(),
      say,
    );
    const faults = database.run(abort.signal);
    let settled = 0;
    const counts = (): Record<string, number> => sumCounts(proxy, faultProxy);
    const progress = setInterval(
      () =>
        say(
          `answered ${settled}/${calls.length}, committed ${supervisor.committed()}, ` +
            `kills ${supervisor.killed['after-commit'] + supervisor.killed.random}/${args.kills}, ` +
            `proxies ${JSON.stringify(counts())}`,
        ),
      5000,
    );
    const deadline = started + args.timeoutMs;
    const logs = await runPayments(calls, {
      urls: { payments: proxy.url, faults: faultProxy?.url ?? proxy.url },
      clients: args.clients,
      attemptTimeoutMs: args.attemptTimeoutMs,
      deadline,
      signal: abort.signal,
      onSettled: () => settled++,
    }).finally(() => clearInterval(progress));
    say(`operations answered after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await Promise.race([supervisor.killsDone(), sleep(Math.max(0, deadline - Date.now()))]);
    abort.abort();
    await faults;

    // What the callers' answers left behind, before anything else is sent.
    const charges = await readCharges(pool, schema);
    const effects = await readEffects(pool, schema);
    // The last incarnation is up: every operation once more, straight to it.
    const replayed = await replayAll(
      calls,
      { payments: `http://127.0.0.1:${port}`, faults: `http://127.0.0.1:${faultPort}` },
      say,
    );
    const account =
      services.cluster &&
      (await accountFailovers(services.cluster, pool, httpEffects(schema), database.failovers));
    // Under async replication: lost payments whose charge vanished with a dead primary.
    const excused = account && windowLosses(account, lostPayments(payments, charges));
    const verdict = checkHttp({
      payments,
      logs,
      charges,
      chargesAfter: await readCharges(pool, schema),
      stored: await readStored(pool, schema),
      replayed,
      ...(excused && { excused }),
    });
    const fired = await readFired(pool, schema);
    const faultVerdict = checkFaultOps({
      ops,
      logs,
      effects,
      effectsAfter: await readEffects(pool, schema),
      fired: fired.runs,
      replayed,
      timings: await readTimings(pool, schema),
    });
    if (account) failoverFindings(account, args.failovers, verdict.problems, shortfalls, say);
    const earlyAnswers = early.early - excusedEarly(early, payments, excused);
    const killCount = supervisor.killed['after-commit'] + supervisor.killed.random;
    if (killCount < args.kills) shortfalls.push(`kills: ${killCount} of ${args.kills} happened`);
    if (services.canRestartPostgres && database.restarts < args.pgRestarts)
      shortfalls.push(`Postgres restarts: ${database.restarts} of ${args.pgRestarts}`);
    if (database.terminations < args.pgTerminations)
      shortfalls.push(`terminations: ${database.terminations} of ${args.pgTerminations}`);
    for (const kind of new Set(ops.filter((o) => o.spec.fires > 0).map((o) => o.kind)))
      if ((faultVerdict.firedByKind.get(kind) ?? 0) === 0)
        shortfalls.push(`handler faults: ${kind} planned, never fired`);
    say(
      `kills by mode: after-commit ${supervisor.killed['after-commit']}, random ${supervisor.killed.random}` +
        `${supervisor.killed.fallbacks > 0 ? ` (${supervisor.killed.fallbacks} armed, killed from outside)` : ''}; ` +
        `server processes started: ${supervisor.spawned} (${supervisor.failedStarts} failed starts); ` +
        `backends terminated: ${database.backends}`,
    );
    say(
      `handler faults fired: ${JSON.stringify(Object.fromEntries(fired.byKind))}; answers looked at ` +
        `before the client: ${early.checked} (${early.unchecked} could not be, Postgres down)`,
    );
    if (supervisor.crashes > 0)
      say(
        `note: the server crashed ${supervisor.crashes} time(s) on its own (stderr above) and was restarted`,
      );
    if (earlyAnswers > 0)
      say(
        `PROBLEM: answers before their COMMIT: ${earlyAnswers} (e.g. ${early.examples.join(', ')})`,
      );
    for (const line of [...verdict.problems, ...faultVerdict.problems]) say(`PROBLEM: ${line}`);
    for (const line of shortfalls) say(`note: ${line}`);
    const result: HttpRunResult = {
      args,
      duplicatesSent,
      kills: killCount,
      pgRestarts: database.restarts,
      pgTerminations: database.terminations,
      serverCrashes: supervisor.crashes,
      proxy: sumCounts(proxy, faultProxy),
      verdict,
      faults: faultVerdict,
      handlerFaults: ops.length,
      earlyAnswers,
      ...(account && { failover: { account, windowLost: verdict.windowLost } }),
      timedOut: verdict.unanswered + faultVerdict.unanswered > 0,
      shortfalls,
      durationMs: Date.now() - started,
    };
    success =
      !result.timedOut &&
      verdict.problems.length + faultVerdict.problems.length === 0 &&
      result.earlyAnswers === 0 &&
      verdict.doubles + faultVerdict.doubles === 0 &&
      verdict.lost - verdict.windowLost + faultVerdict.lost === 0;
    say(`took ${(result.durationMs / 1000).toFixed(1)} s`);
    return result;
  } finally {
    await scope.close();
  }
}

/** `tenant/key` of the payments with no charge. */
function lostPayments(payments: Payment[], charges: ChargeRow[]): string[] {
  const charged = new Set(charges.map((c) => `${c.tenant}/${c.key}`));
  return payments.map((p) => `${p.tenant}/${p.key}`).filter((id) => !charged.has(id));
}

/**
 * Early answers of excused payments: a 201 whose charge the look (through the proxy,
 * maybe already on the new primary) could not find because it vanished with the old one.
 */
function excusedEarly(
  early: EarlyAnswers,
  payments: Payment[],
  excused: ReadonlySet<string> | undefined,
): number {
  if (excused === undefined || excused.size === 0) return 0;
  const tenant = new Map(payments.map((p) => [p.key, p.tenant]));
  return early.earlyKeys.filter((k) => excused.has(`${tenant.get(k) ?? '?'}/${k}`)).length;
}

function sumCounts(...proxies: Array<FaultProxy | undefined>): HttpRunResult['proxy'] {
  const sum = { pass: 0, reset: 0, drop: 0, delay: 0 };
  for (const p of proxies) {
    if (p === undefined) continue;
    const counts = p.counts();
    for (const fault of Object.keys(sum) as Array<keyof typeof sum>) sum[fault] += counts[fault];
  }
  return sum;
}
