import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrateOutbox, outboxStats } from 'effectively-once/outbox';
import { sleep } from '../../src/sleep.js';
import { Fleet } from '../consumer/fleet.js';
import type { Send } from '../consumer/plan.js';
import { produce } from '../consumer/producer.js';
import { Rng } from '../../kit/rng.js';
import { dropSchemaAtClose, openRunScope, openRunServices } from '../../kit/run-scope.js';
import type { OutboxChaosArgs } from './args.js';
import { accountFailovers, failoverFindings, windowLosses } from '../failover/accounting.js';
import type { FailoverResult } from '../failover/summary.js';
import { checkOutbox, outboxEffects, progress, type OutboxVerdict } from './checker.js';
import { ROLES, runOutboxNemesis, type OutboxFaults, type Role } from './nemesis.js';
import { createInput, createOutput } from './outputs.js';
import { PoisonFixer } from './poison.js';
import { createOutboxChaosSchema, type Operation, type OutboxNodeConfig } from './shared.js';

const NODE = fileURLToPath(new URL('./node.ts', import.meta.url));
const say = (line: string): void => console.error(`[chaos] ${line}`);

/** What an outbox run did and found. */
export interface OutboxRunResult extends OutboxFaults {
  args: OutboxChaosArgs;
  duplicatesSent: number;
  /** Rows that parked as poison, and the requeues that put parked rows back. */
  parked: number;
  requeued: number;
  /**
   * Copies beyond one per operation that reached B's side: records on the output topic,
   * requests to the receiver (undefined for SQS FIFO, which drops re-sent messages).
   */
  republished: number | undefined;
  verdict: OutboxVerdict;
  /** With `--failovers`: what they did (chaos/failover/accounting.ts). */
  failover?: FailoverResult;
  timedOut: boolean;
  unsettled: number;
  shortfalls: string[];
  durationMs: number;
}

/**
 * One outbox chaos run: private Postgres and the broker; a producer sends N operations
 * (some twice) to service A's input; A's consumers enqueue an outbox row (ordering key =
 * account, one of two destinations by account) and apply each in one transaction;
 * relays of the two destination sets publish the rows; service B applies them,
 * deduplicated by the outbox id. The nemesis kills relays, A and B processes in turn and
 * restarts Postgres; poison rows park until fixed; then the checker reads both
 * services' effects.
 */
export async function runOutboxChaos(args: OutboxChaosArgs): Promise<OutboxRunResult> {
  const started = Date.now();
  const rng = new Rng(args.seed);
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const sends = planSends(rng, args);
  const duplicatesSent = sends.length - args.operations;
  say(
    `run ${runId}: target=outbox publisher=${args.publisher} broker=${args.broker} ` +
      `operations=${args.operations} accounts=${args.accounts} (duplicated ${duplicatesSent}) ` +
      `poison=${args.poison} a=${args.aWorkers} relays=${args.relays} b=${args.bWorkers} ` +
      `kills=${args.kills} pg_restarts=${args.pgRestarts} broker_restarts=${args.brokerRestarts} seed=${args.seed}` +
      (args.control ? ` control=${args.control}` : ''),
  );
  const scope = openRunScope(say, 'the processes and services');
  const { abort } = scope;
  let success = false;
  try {
    const { services, pool } = await openRunServices(scope, say, args.broker, args);
    const schema = `chaos_outbox_${runId}`;
    await createOutboxChaosSchema(pool, schema);
    await migrateOutbox(pool, { schema });
    dropSchemaAtClose(scope, say, pool, schema, () => success && !args.keep);
    const input = await createInput(args, services, runId);
    scope.defer(() => input.close(success && !args.keep));
    const output = await createOutput(args, services, runId, pool, schema);
    scope.defer(() => output.close(success && !args.keep));
    // Outside the services' directory, which is removed at the end: a failed run's logs stay.
    const logDir = path.join(os.tmpdir(), 'effectively-once-chaos', runId);
    fs.mkdirSync(logDir, { recursive: true });
    say(`process logs in ${logDir}`);

    const base = {
      databaseUrl: services.databaseUrl,
      schema,
      publisher: args.publisher,
      input: input.worker,
      output: output.config,
      leaseMs: args.leaseMs,
      hotDelayMs: args.hotDelayMs,
      control: args.control,
    };
    const counts: Record<Role, number> = { relay: args.relays, a: args.aWorkers, b: args.bWorkers };
    const fleets = Object.fromEntries(
      ROLES.map((role) => [
        role,
        new Fleet<OutboxNodeConfig>(
          (index) => ({ ...base, role, index }),
          counts[role],
          rng,
          path.join(logDir, `${role}.log`),
          NODE,
        ),
      ]),
    ) as Record<Role, Fleet<OutboxNodeConfig>>;
    for (const role of ROLES) fleets[role].start();
    scope.defer(async () => {
      await Promise.all(ROLES.map((role) => fleets[role].stop()));
    });

    // Spread the sends over enough time for the faults to land while operations flow.
    const seconds = Math.max(
      8,
      4 * args.kills + 8 * (args.pgRestarts + args.brokerRestarts + args.failovers),
    );
    let producerDone = false;
    const producing = produce(
      input,
      sends,
      Math.ceil(sends.length / seconds),
      abort.signal,
    ).finally(() => (producerDone = true));

    let applied = 0;
    const faults: OutboxFaults = {
      kills: { relay: 0, a: 0, b: 0 },
      relayAfterPublish: 0,
      pgRestarts: 0,
      brokerRestarts: 0,
      failovers: [],
    };
    let nemesisDone = false;
    const nemesis = runOutboxNemesis(
      args,
      rng,
      fleets,
      services,
      () => applied,
      abort.signal,
      say,
      faults,
    ).finally(() => (nemesisDone = true));
    const poison = new PoisonFixer(pool, schema, args.operations, args.poison, say);
    const deadline = started + args.timeoutMs;
    const ticker = setInterval(
      () =>
        say(`applied by B ${applied}/${args.operations}, kills ${JSON.stringify(faults.kills)}`),
      5000,
    );

    // Quiescent: every operation applied by both, the outbox published, both ends
    // drained, twice in a row a second apart (a late double would still land). Under
    // async failovers some operations are gone for good (the window): there, an
    // incomplete run also ends once all that holds five times in a row.
    const mayLose = args.failovers > 0 && args.replication === 'async';
    let quiet = 0;
    let timedOut = false;
    let unsettled = 0;
    for (;;) {
      await sleep(1000);
      const now = await progress(pool, schema);
      if (now !== undefined) applied = now.b;
      if (now !== undefined) await poison.tick(now.a).catch(() => undefined);
      let done = false;
      const complete = now !== undefined && now.a >= args.operations && now.b >= args.operations;
      if (now !== undefined && nemesisDone && producerDone && (complete || mayLose)) {
        const stats = await outboxStats(pool, { schema }).catch(() => undefined);
        done =
          stats !== undefined &&
          stats.pending === 0 &&
          stats.parked === 0 &&
          (await input.drained()) &&
          (await output.drained());
      }
      quiet = done ? quiet + 1 : 0;
      if (quiet >= (complete ? 2 : 5)) break;
      if (Date.now() > deadline) {
        timedOut = true;
        unsettled = args.operations - (now?.b ?? 0);
        say(`timed out: ${unsettled} operations not applied by B`);
        break;
      }
    }
    clearInterval(ticker);
    abort.abort();
    await producing;
    await nemesis;
    await Promise.all(ROLES.map((role) => fleets[role].stop()));

    const account =
      services.cluster &&
      (await accountFailovers(services.cluster, pool, outboxEffects(schema), faults.failovers));
    const verdict = await checkOutbox(
      pool,
      schema,
      args.operations,
      account && ((lost) => windowLosses(account, lost)),
    );
    const shortfalls: string[] = [];
    if (account) failoverFindings(account, args.failovers, verdict.problems, shortfalls, say);
    const killCount = faults.kills.relay + faults.kills.a + faults.kills.b;
    if (killCount < args.kills) shortfalls.push(`kills: ${killCount} of ${args.kills} happened`);
    if (services.canRestartPostgres && faults.pgRestarts < args.pgRestarts)
      shortfalls.push(`Postgres restarts: ${faults.pgRestarts} of ${args.pgRestarts}`);
    if (services.canRestartBroker && faults.brokerRestarts < args.brokerRestarts)
      shortfalls.push(`broker restarts: ${faults.brokerRestarts} of ${args.brokerRestarts}`);
    const parked = await poison.parkedRows();
    if (args.poison > 0 && parked === 0) shortfalls.push('poison: no row parked');
    for (const role of ROLES) {
      const f = fleets[role];
      say(`${role}: ${f.spawned} processes started, exits ${summarizeExits(f)}`);
    }
    for (const line of verdict.problems) say(`PROBLEM: ${line}`);
    for (const line of shortfalls) say(`note: ${line}`);
    const result: OutboxRunResult = {
      args,
      duplicatesSent,
      ...faults,
      parked,
      requeued: poison.requeued,
      republished: await output.copies(),
      verdict,
      ...(account && { failover: { account, windowLost: verdict.windowLost } }),
      timedOut,
      unsettled,
      shortfalls,
      durationMs: Date.now() - started,
    };
    success =
      !timedOut &&
      verdict.problems.length === 0 &&
      verdict.doubles === 0 &&
      verdict.lost === verdict.windowLost &&
      verdict.orderViolations === 0;
    say(`took ${(result.durationMs / 1000).toFixed(1)} s`);
    return result;
  } finally {
    await scope.close();
  }
}

/**
 * N operations on random accounts, plus duplicate sends of random ones, shuffled;
 * `poison` of the operations sent in the first half are poison (all their sends).
 */
function planSends(rng: Rng, args: OutboxChaosArgs): Send[] {
  const originals: Operation[] = Array.from({ length: args.operations }, (_, i) => ({
    op: `op-${i}`,
    account: `acct-${rng.int(0, args.accounts - 1)}`,
  }));
  const picks = [
    ...originals,
    ...Array.from({ length: Math.ceil(args.operations * args.duplicateRatio) }, () =>
      rng.pick(originals),
    ),
  ];
  const order = rng.shuffle(picks);
  const early = [...new Set(order.slice(0, Math.ceil(order.length / 2)))];
  for (const body of rng.shuffle(early).slice(0, args.poison)) body.poison = true;
  return order.map((body) => ({
    key: body.op,
    body: JSON.stringify(body),
    slot: rng.int(0, 1_000_000),
  }));
}

function summarizeExits(fleet: Fleet<OutboxNodeConfig>): string {
  const byCause = new Map<string, number>();
  for (const exit of fleet.exits) {
    const cause = exit.signal ?? `code ${exit.code}`;
    byCause.set(cause, (byCause.get(cause) ?? 0) + 1);
  }
  return [...byCause].map(([cause, n]) => `${cause} ${n}`).join(', ') || 'none';
}
