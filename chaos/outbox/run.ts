import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { migrateOutbox, outboxStats } from 'effectively-once/outbox';
import { sleep } from '../../src/sleep.js';
import { adminPool, dropChaosSchema } from '../db.js';
import { Fleet } from '../fleet.js';
import { createKafkaBroker } from '../kafka-broker.js';
import { planEvents } from '../nemesis.js';
import type { Send } from '../plan.js';
import { produce } from '../producer.js';
import { Rng } from '../rng.js';
import { ensureServices } from '../services.js';
import type { OutboxChaosArgs } from './args.js';
import { checkOutbox, progress, type OutboxVerdict } from './checker.js';
import { createOutboxChaosSchema, type OutboxNodeConfig, type Operation } from './shared.js';
import { openRunScope } from '../run-scope.js';

const NODE = fileURLToPath(new URL('./node.ts', import.meta.url));
const ROLES = ['relay', 'a', 'b'] as const;
type Role = (typeof ROLES)[number];
const say = (line: string): void => console.error(`[chaos] ${line}`);

/** What an outbox run did and found. */
export interface OutboxRunResult {
  args: OutboxChaosArgs;
  duplicatesSent: number;
  kills: Record<Role, number>;
  /** Relay kills that landed between a publish and its mark. */
  relayAfterPublish: number;
  pgRestarts: number;
  brokerRestarts: number;
  /** Records on the output topic beyond one per operation: relays that published again after a kill. */
  republished: number;
  verdict: OutboxVerdict;
  timedOut: boolean;
  unsettled: number;
  shortfalls: string[];
  durationMs: number;
}

/**
 * One outbox chaos run: private Postgres and Kafka; a producer sends N operations (some
 * twice) to the input topic; service A's consumers apply each and enqueue an outbox row
 * (ordering key = account) in the same transaction; relays publish the rows to the
 * output topic (record key = account); service B's consumers apply them, deduplicated
 * by the outbox id. Relays, A and B workers are SIGKILLed in turn at progress points
 * (B's applied operations / N) and Postgres is crash-restarted; then the checker reads
 * both services' effects.
 */
export async function runOutboxChaos(args: OutboxChaosArgs): Promise<OutboxRunResult> {
  const started = Date.now();
  const rng = new Rng(args.seed);
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const sends = planSends(rng, args);
  const duplicatesSent = sends.length - args.operations;
  say(
    `run ${runId}: target=outbox broker=kafka operations=${args.operations} accounts=${args.accounts} ` +
      `(duplicated ${duplicatesSent}) a=${args.aWorkers} relays=${args.relays} b=${args.bWorkers} ` +
      `kills=${args.kills} pg_restarts=${args.pgRestarts} broker_restarts=${args.brokerRestarts} seed=${args.seed}` +
      (args.control ? ` control=${args.control}` : ''),
  );
  const scope = openRunScope(say, 'the processes and services');
  const { abort } = scope;
  let success = false;
  try {
    const services = await ensureServices('kafka', say);
    scope.defer(() => services.stop());
    if (services.root) say(`private services in ${services.root}`);
    const brokers = services.brokerEndpoint.split(',');
    const pool = adminPool(services.databaseUrl);
    scope.defer(() => pool.end());
    const schema = `chaos_outbox_${runId}`;
    await createOutboxChaosSchema(pool, schema);
    await migrateOutbox(pool, { schema });
    scope.defer(async () => {
      if (success && !args.keep) await dropChaosSchema(pool, schema);
      else say(`kept schema ${schema}`);
    });
    const input = await createKafkaBroker(brokers, `${runId}-a`, args.partitions);
    const output = await createKafkaBroker(brokers, `${runId}-b`, args.partitions);
    scope.defer(() => input.close(success && !args.keep));
    scope.defer(() => output.close(success && !args.keep));
    if (input.worker.kind !== 'kafka' || output.worker.kind !== 'kafka') throw new Error('kafka');
    // Outside the services' directory, which is removed at the end: a failed run's logs stay.
    const logDir = path.join(os.tmpdir(), 'effectively-once-chaos', runId);
    fs.mkdirSync(logDir, { recursive: true });
    say(`process logs in ${logDir}`);

    const base = {
      databaseUrl: services.databaseUrl,
      schema,
      brokers,
      inTopic: input.worker.topic,
      groupA: input.worker.groupId,
      outTopic: output.worker.topic,
      groupB: output.worker.groupId,
      leaseMs: args.leaseMs,
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
    const seconds = Math.max(8, 4 * args.kills + 8 * (args.pgRestarts + args.brokerRestarts));
    const producing = produce(input, sends, Math.ceil(sends.length / seconds), abort.signal);

    let applied = 0;
    const events = planEvents(rng, args.kills, args.pgRestarts, args.brokerRestarts);
    const kills: Record<Role, number> = { relay: 0, a: 0, b: 0 };
    let pgRestarts = 0;
    let brokerRestarts = 0;
    let killIndex = 0;
    let relayAfterPublish = 0;
    const deadline = started + args.timeoutMs;
    const ticker = setInterval(
      () => say(`applied by B ${applied}/${args.operations}, kills ${JSON.stringify(kills)}`),
      5000,
    );
    const nemesis = (async () => {
      for (const event of events) {
        while (applied < event.at * args.operations && !abort.signal.aborted) await sleep(100);
        if (abort.signal.aborted) return;
        if (event.kind === 'pg-restart') {
          const downMs = rng.int(500, 3000);
          say(`nemesis: Postgres crash-restart (down ${downMs} ms) at ${applied}`);
          await services.restartPostgres(downMs);
          pgRestarts++;
          continue;
        }
        if (event.kind === 'broker-restart') {
          const downMs = rng.int(500, 3000);
          say(`nemesis: Kafka SIGKILL + restart (down ${downMs} ms) at ${applied}`);
          await services.restartBroker(downMs);
          brokerRestarts++;
          continue;
        }
        const role = ROLES[killIndex % ROLES.length] as Role;
        // Every other relay kill lands between a publish and its mark (the relay kills
        // itself there when armed; from outside if it publishes nothing for 5 s).
        const afterPublish = role === 'relay' && Math.floor(killIndex / ROLES.length) % 2 === 0;
        killIndex++;
        for (;;) {
          const ready = fleets[role].readySlots();
          if (ready.length > 0) {
            const slot = rng.pick(ready);
            const armedExit = afterPublish
              ? await fleets[role].armAndWait(slot, 'after-commit', 5000)
              : undefined;
            const exit = armedExit ?? (await fleets[role].kill(slot));
            if (exit?.signal === 'SIGKILL') {
              kills[role]++;
              if (armedExit !== undefined) relayAfterPublish++;
              const how = afterPublish
                ? armedExit !== undefined
                  ? ' after a publish'
                  : ' (armed, not reached: from outside)'
                : '';
              say(`nemesis: SIGKILL ${role} ${slot} (pid ${exit.pid})${how} at ${applied}`);
              break;
            }
          }
          if (abort.signal.aborted) return;
          await sleep(100);
        }
      }
    })();

    // Quiescent: every operation applied by both, the outbox published, both groups
    // caught up, twice in a row a second apart (a late double would still land).
    let quiet = 0;
    let timedOut = false;
    let unsettled = 0;
    for (;;) {
      await sleep(1000);
      const now = await progress(pool, schema);
      if (now !== undefined) applied = now.b;
      const nemesisDone = await Promise.race([
        nemesis.then(() => true),
        sleep(0).then(() => false),
      ]);
      let done = false;
      if (
        now !== undefined &&
        now.a >= args.operations &&
        now.b >= args.operations &&
        nemesisDone
      ) {
        const stats = await outboxStats(pool, { schema }).catch(() => undefined);
        done =
          stats !== undefined &&
          stats.pending === 0 &&
          stats.parked === 0 &&
          (await input.drained()) &&
          (await output.drained());
      }
      quiet = done ? quiet + 1 : 0;
      if (quiet >= 2) break;
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

    const verdict = await checkOutbox(pool, schema, args.operations);
    const records = await topicRecords(brokers, output.worker.topic);
    const shortfalls: string[] = [];
    const killCount = kills.relay + kills.a + kills.b;
    if (killCount < args.kills) shortfalls.push(`kills: ${killCount} of ${args.kills} happened`);
    if (services.canRestartPostgres && pgRestarts < args.pgRestarts)
      shortfalls.push(`Postgres restarts: ${pgRestarts} of ${args.pgRestarts}`);
    if (services.canRestartBroker && brokerRestarts < args.brokerRestarts)
      shortfalls.push(`broker restarts: ${brokerRestarts} of ${args.brokerRestarts}`);
    for (const role of ROLES) {
      const f = fleets[role];
      say(`${role}: ${f.spawned} processes started, exits ${summarizeExits(f)}`);
    }
    for (const line of verdict.problems) say(`PROBLEM: ${line}`);
    for (const line of shortfalls) say(`note: ${line}`);
    const result: OutboxRunResult = {
      args,
      duplicatesSent,
      kills,
      relayAfterPublish,
      pgRestarts,
      brokerRestarts,
      republished: Math.max(0, records - verdict.applied),
      verdict,
      timedOut,
      unsettled,
      shortfalls,
      durationMs: Date.now() - started,
    };
    success =
      !timedOut &&
      verdict.problems.length === 0 &&
      verdict.doubles === 0 &&
      verdict.lost === 0 &&
      verdict.orderViolations === 0;
    say(`output topic holds ${records} records; took ${(result.durationMs / 1000).toFixed(1)} s`);
    return result;
  } finally {
    await scope.close();
  }
}

/** N operations on random accounts, plus duplicate sends of random ones, shuffled. */
function planSends(rng: Rng, args: OutboxChaosArgs): Send[] {
  const originals: Send[] = Array.from({ length: args.operations }, (_, i) => {
    const body: Operation = { op: `op-${i}`, account: `acct-${rng.int(0, args.accounts - 1)}` };
    return { key: body.op, body: JSON.stringify(body), slot: rng.int(0, 1_000_000) };
  });
  const duplicates = Array.from(
    { length: Math.ceil(args.operations * args.duplicateRatio) },
    () => {
      const original = rng.pick(originals);
      return { ...original, slot: rng.int(0, 1_000_000) };
    },
  );
  return rng.shuffle([...originals, ...duplicates]);
}

/** Records on a topic (its partitions' high - low watermarks). */
async function topicRecords(brokers: string[], topic: string): Promise<number> {
  const admin = new Kafka({
    clientId: 'chaos-outbox-check',
    brokers,
    logLevel: logLevel.NOTHING,
  }).admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return offsets.reduce((sum, p) => sum + Number(p.high) - Number(p.low), 0);
  } finally {
    await admin.disconnect();
  }
}

function summarizeExits(fleet: Fleet<OutboxNodeConfig>): string {
  const byCause = new Map<string, number>();
  for (const exit of fleet.exits) {
    const cause = exit.signal ?? `code ${exit.code}`;
    byCause.set(cause, (byCause.get(cause) ?? 0) + 1);
  }
  return [...byCause].map(([cause, n]) => `${cause} ${n}`).join(', ') || 'none';
}
