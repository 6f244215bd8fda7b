import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type pg from 'pg';
import pLimit from 'p-limit';
import { idempotentFetch } from 'effectively-once/client';
import { sleep } from '../../src/sleep.js';
import { quoteIdentifier } from '../../src/store/identifiers.js';
import { FaultProxy } from '../../test/helpers/fault-proxy.js';
import { adminPool, dropChaosSchema } from '../db.js';
import { Rng } from '../rng.js';
import { ensureServices, type ChaosServices } from '../services.js';
import type { HttpChaosArgs } from './args.js';
import { checkHttp, readCharges, readStored } from './checker.js';
import { planPayments, runPayments, type Answer, type Payment } from './clients.js';
import { planKills, SERVER_APPLICATION, ServerSupervisor } from './server.js';
import type { HttpRunResult } from './summary.js';
import { openRunScope } from '../run-scope.js';

const say = (line: string): void => console.error(`[chaos] ${line}`);

/**
 * One HTTP chaos run: private Postgres; the payment server (effectively-once/http) in a
 * child process behind a fault-injecting TCP proxy; N logical payments, each with one
 * idempotency key, sent by idempotentFetch callers through the proxy while the server
 * is SIGKILLed and restarted and its Postgres connections are terminated; then every
 * payment is replayed once more directly, and the checker reads the charges and the
 * key table.
 */
export async function runHttpChaos(args: HttpChaosArgs): Promise<HttpRunResult> {
  const started = Date.now();
  const rng = new Rng(args.seed);
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const payments = planPayments(rng, args.payments, args.duplicateRatio);
  const kills = planKills(rng, args.kills, args.payments);
  const duplicatesSent = payments.filter((p) => p.duplicated).length;
  say(
    `run ${runId}: target=http framework=${args.framework} payments=${args.payments} ` +
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
    const services = await ensureServices(null, say);
    scope.defer(() => services.stop());
    if (services.root) say(`private services in ${services.root}`);
    const shortfalls: string[] = [];
    if (args.pgRestarts > 0 && !services.canRestartPostgres)
      say('note: DATABASE_URL was given, so Postgres restarts are impossible (pg_restarts=0)');
    const pool = adminPool(services.databaseUrl);
    scope.defer(() => pool.end());
    const schema = `chaos_http_${runId}`;
    await pool.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
    scope.defer(async () => {
      if (success && !args.keep) await dropChaosSchema(pool, schema);
      else say(`kept schema ${schema}`);
    });

    const supervisor = new ServerSupervisor({
      framework: args.framework,
      databaseUrl: services.databaseUrl,
      schema,
      kills,
      rng,
      log: (line) => say(`nemesis: ${line}`),
    });
    const port = await supervisor.start();
    scope.defer(() => supervisor.stop());
    const proxy = await FaultProxy.start({
      target: { host: '127.0.0.1', port },
      faults: { drop: args.drop, reset: args.reset, delay: args.delay },
      seed: args.seed,
      delayMs: args.attemptTimeoutMs + 500,
      // Bounded, so every payment can finish; the server's faults are not bounded.
      maxFaultsPerKey: 4,
    });
    scope.defer(() => proxy.close());
    say(`server on 127.0.0.1:${port}, callers through the proxy at ${proxy.url}`);

    const database = new DatabaseNemesis(rng, args, services, pool, () => supervisor.committed());
    const faults = database.run(abort.signal);
    let settled = 0;
    const progress = setInterval(
      () =>
        say(
          `answered ${settled}/${args.payments}, committed ${supervisor.committed()}, ` +
            `kills ${supervisor.killed['after-commit'] + supervisor.killed.random}/${args.kills}, ` +
            `proxy ${JSON.stringify(proxy.counts())}`,
        ),
      5000,
    );
    const deadline = started + args.timeoutMs;
    const logs = await runPayments(payments, {
      url: proxy.url,
      clients: args.clients,
      attemptTimeoutMs: args.attemptTimeoutMs,
      deadline,
      signal: abort.signal,
      onSettled: () => settled++,
    }).finally(() => clearInterval(progress));
    say(`payments answered after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await Promise.race([supervisor.killsDone(), sleep(Math.max(0, deadline - Date.now()))]);
    abort.abort();
    await faults;

    // The last incarnation is up: every payment once more, straight to it.
    const replayed = await replayAll(payments, `http://127.0.0.1:${port}`);
    const verdict = checkHttp({
      payments,
      logs,
      charges: await readCharges(pool, schema),
      stored: await readStored(pool, schema),
      replayed,
    });
    const killCount = supervisor.killed['after-commit'] + supervisor.killed.random;
    if (killCount < args.kills) shortfalls.push(`kills: ${killCount} of ${args.kills} happened`);
    if (services.canRestartPostgres && database.restarts < args.pgRestarts)
      shortfalls.push(`Postgres restarts: ${database.restarts} of ${args.pgRestarts}`);
    if (database.terminations < args.pgTerminations)
      shortfalls.push(`terminations: ${database.terminations} of ${args.pgTerminations}`);
    say(
      `kills by mode: after-commit ${supervisor.killed['after-commit']}, random ${supervisor.killed.random}` +
        `${supervisor.killed.fallbacks > 0 ? ` (${supervisor.killed.fallbacks} armed, killed from outside)` : ''}; ` +
        `server processes started: ${supervisor.spawned} (${supervisor.failedStarts} failed starts); ` +
        `backends terminated: ${database.backends}`,
    );
    if (supervisor.crashes > 0)
      say(
        `note: the server crashed ${supervisor.crashes} time(s) on its own (stderr above) and was restarted`,
      );
    for (const line of verdict.problems) say(`PROBLEM: ${line}`);
    for (const line of shortfalls) say(`note: ${line}`);
    const result: HttpRunResult = {
      args,
      duplicatesSent,
      kills: killCount,
      pgRestarts: database.restarts,
      pgTerminations: database.terminations,
      serverCrashes: supervisor.crashes,
      proxy: proxy.counts(),
      verdict,
      timedOut: verdict.unanswered > 0,
      shortfalls,
      durationMs: Date.now() - started,
    };
    success =
      !result.timedOut &&
      verdict.problems.length === 0 &&
      verdict.doubles === 0 &&
      verdict.lost === 0;
    say(`took ${(result.durationMs / 1000).toFixed(1)} s`);
    return result;
  } finally {
    await scope.close();
  }
}

/**
 * Each payment once more, from a fresh caller with the same key and bytes, straight to
 * the server: it must be a replay of what the run's callers got.
 */
async function replayAll(payments: Payment[], url: string): Promise<Map<string, Answer>> {
  const answers = new Map<string, Answer>();
  const limit = pLimit(16);
  await Promise.all(
    payments.map((payment) =>
      limit(async () => {
        try {
          const { response, replayed } = await idempotentFetch(
            new URL('/charges', url),
            { method: 'POST', headers: { 'x-tenant': payment.tenant } },
            { key: payment.key, json: payment.body, attempts: 10, deadlineMs: 30_000 },
          );
          answers.set(payment.key, {
            status: response.status,
            body: await response.text(),
            location: response.headers.get('location'),
            contentType: response.headers.get('content-type'),
            replayed,
          });
        } catch (error) {
          say(`replay of ${payment.key} failed: ${String(error)}`);
        }
      }),
    ),
  );
  return answers;
}

/**
 * Postgres faults at spread-out moments of the run (commit counts below N):
 * `pg_terminate_backend` of every connection the server holds, and crash-restarts.
 */
class DatabaseNemesis {
  terminations = 0;
  /** Server backends terminated over all terminations. */
  backends = 0;
  restarts = 0;
  private readonly events: Array<{ kind: 'terminate' | 'restart'; at: number }>;

  constructor(
    private readonly rng: Rng,
    args: HttpChaosArgs,
    private readonly services: ChaosServices,
    private readonly pool: pg.Pool,
    private readonly committed: () => number,
  ) {
    const at = (): number => Math.floor(args.payments * rng.between(0.05, 0.9));
    this.events = [
      ...Array.from({ length: args.pgTerminations }, () => ({
        kind: 'terminate' as const,
        at: at(),
      })),
      ...Array.from({ length: services.canRestartPostgres ? args.pgRestarts : 0 }, () => ({
        kind: 'restart' as const,
        at: at(),
      })),
    ].sort((a, b) => a.at - b.at);
  }

  async run(signal: AbortSignal): Promise<void> {
    for (const event of this.events) {
      while (!signal.aborted && this.committed() < event.at) await sleep(20);
      if (signal.aborted) return;
      if (event.kind === 'restart') {
        const downMs = Math.round(this.rng.between(500, 2000));
        say(`nemesis: Postgres crash-restart (down ${downMs} ms) at ${this.committed()} commits`);
        await this.services.restartPostgres(downMs);
        this.restarts++;
        continue;
      }
      // The server may be between incarnations: wait until it holds connections again.
      for (let tries = 0; tries < 100 && !signal.aborted; tries++) {
        const n = await this.terminate().catch(() => 0);
        if (n > 0) {
          this.terminations++;
          this.backends += n;
          say(`nemesis: terminated ${n} server backend(s) at ${this.committed()} commits`);
          break;
        }
        await sleep(50);
      }
    }
  }

  private async terminate(): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n
         FROM pg_stat_activity WHERE application_name = $1`,
      [SERVER_APPLICATION],
    );
    return rows[0]?.n ?? 0;
  }
}
