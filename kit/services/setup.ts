import fs from 'node:fs';
import path from 'node:path';
import { createElasticMq } from './elasticmq.js';
import { stopJava } from './java.js';
import { KAFKA_VERSIONS, createKafka, kafkaMajor } from './kafka.js';
import { createLocalstack } from './localstack.js';
import { HOST, freePorts } from './ports.js';
import { createPgBouncer, pgBouncerStop, pgBouncerVersion } from './pgbouncer.js';
import { createPostgres, pgStop, postgresMajor } from './postgres.js';
import { isAlive, killProcessesUsing } from './process.js';
import { createRabbitMq, rabbitMqStop } from './rabbitmq.js';
import {
  RUNS_DIR,
  STATE_ENV,
  readStateFile,
  stateFile,
  writeState,
  type ServicesState,
} from './state.js';

/** Service name → the env var that carries its endpoint to the tests. */
export const ENDPOINT_ENV = {
  postgres: 'DATABASE_URL',
  sqs: 'SQS_ENDPOINT',
  kafka: 'KAFKA_BROKERS',
  pgbouncer: 'PGBOUNCER_URL',
  rabbitmq: 'RABBITMQ_URL',
} as const;
export type ServiceName = keyof typeof ENDPOINT_ENV;

/**
 * Started only when asked for (EO_SERVICES): PgBouncer and RabbitMQ (Debian packages) are
 * not on every machine, and a RabbitMQ node costs seconds to boot that most runs need not pay.
 */
export const ON_REQUEST: readonly ServiceName[] = ['pgbouncer', 'rabbitmq'];

/**
 * EO_VIA_PGBOUNCER=1: the tests' `databaseUrl()` (test/helpers/db.ts) is PgBouncer's,
 * in transaction mode, in front of the test Postgres; global setup starts it.
 */
export function viaPgBouncer(): boolean {
  return process.env['EO_VIA_PGBOUNCER'] === '1';
}

/**
 * Services to start: the default ones, or the EO_SERVICES list (e.g. "postgres,sqs"
 * when iterating on tests that need no broker), plus PgBouncer with
 * EO_VIA_PGBOUNCER=1, minus those whose endpoint env var is already set: a given
 * endpoint is used as is.
 */
export function servicesToStart(): ServiceName[] {
  const all = Object.keys(ENDPOINT_ENV) as ServiceName[];
  const listed = process.env['EO_SERVICES']
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = listed?.filter((s) => !all.includes(s as ServiceName)) ?? [];
  if (unknown.length)
    throw new Error(
      `EO_SERVICES: unknown service(s) ${unknown.join(', ')}; known: ${all.join(', ')}`,
    );
  const wanted = (s: ServiceName): boolean =>
    listed ? listed.includes(s) : !ON_REQUEST.includes(s);
  return all.filter(
    (s) => (wanted(s) || (s === 'pgbouncer' && viaPgBouncer())) && !process.env[ENDPOINT_ENV[s]],
  );
}

/** Names of the endpoint env vars global setup set, so teardown unsets exactly those (watch mode reruns setup). */
const SET_ENV = 'EO_SERVICES_SET_ENV';

export function exportEndpoint(service: ServiceName, value: string): void {
  const name = ENDPOINT_ENV[service];
  process.env[name] = value;
  const set = new Set(process.env[SET_ENV]?.split(',').filter(Boolean));
  process.env[SET_ENV] = [...set.add(name)].join(',');
}

export function unexportEndpoints(): void {
  for (const name of process.env[SET_ENV]?.split(',').filter(Boolean) ?? [])
    delete process.env[name];
  delete process.env[SET_ENV];
}

/**
 * The SQS emulator EO_SQS_EMULATOR selects: ElasticMQ (default, a JVM from
 * Maven jars) or LocalStack (its Python runtime in a pinned venv). Users run
 * either; CI runs the SQS suite against both.
 */
export function sqsEmulator(): 'elasticmq' | 'localstack' {
  const wanted = process.env['EO_SQS_EMULATOR'] ?? 'elasticmq';
  if (wanted === 'elasticmq' || wanted === 'localstack') return wanted;
  throw new Error(`EO_SQS_EMULATOR=${wanted}: expected "elasticmq" or "localstack"`);
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

/** Starts the native services in parallel; on any failure stops the ones that came up, then throws. */
export async function startNative(services: ServiceName[]): Promise<void> {
  await reapStaleRuns();
  fs.mkdirSync(RUNS_DIR, { recursive: true });
  const root = fs.mkdtempSync(path.join(RUNS_DIR, 'run-'));
  fs.chmodSync(root, 0o755); // the postgres user must reach its data dir inside
  const state: ServicesState = { provider: 'native', ownerPid: process.pid, root };
  writeState(state);
  process.env[STATE_ENV] = stateFile(root);

  const [pgPort, sqsPort, kafkaPort, controllerPort, bouncerPort, amqpPort, distPort] =
    (await freePorts(7)) as [number, number, number, number, number, number, number];
  const started = Date.now();
  const timings: string[] = [];
  // PgBouncer starts in front of the Postgres this run starts, or of the DATABASE_URL given.
  let postgresUp: (url: string) => void = () => undefined;
  let postgresFailed: (error: unknown) => void = () => undefined;
  const postgresUrl = services.includes('postgres')
    ? new Promise<string>((resolve, reject) => {
        postgresUp = resolve;
        postgresFailed = reject;
      })
    : Promise.resolve(process.env[ENDPOINT_ENV.postgres]);
  postgresUrl.catch(() => undefined); // reported by the postgres start itself
  const start: Record<ServiceName, () => Promise<void>> = {
    postgres: async () => {
      try {
        state.postgres = await createPostgres(root, pgPort);
      } catch (error) {
        postgresFailed(error);
        throw error;
      }
      exportEndpoint('postgres', state.postgres.url);
      postgresUp(state.postgres.url);
    },
    pgbouncer: async () => {
      const serverUrl = await postgresUrl.catch(() => {
        throw new Error('PgBouncer not started: its Postgres did not start');
      });
      if (!serverUrl)
        throw new Error(
          'PgBouncer needs a Postgres: add postgres to EO_SERVICES or set DATABASE_URL',
        );
      state.pgbouncer = await createPgBouncer(root, bouncerPort, serverUrl);
      exportEndpoint('pgbouncer', state.pgbouncer.url);
    },
    sqs: async () => {
      if (sqsEmulator() === 'localstack') state.localstack = await createLocalstack(root, sqsPort);
      else state.elasticmq = await createElasticMq(root, sqsPort);
      exportEndpoint('sqs', `http://${HOST}:${sqsPort}`);
    },
    kafka: async () => {
      state.kafka = await createKafka(root, kafkaPort, controllerPort);
      exportEndpoint('kafka', state.kafka.brokers);
    },
    rabbitmq: async () => {
      state.rabbitmq = await createRabbitMq(root, amqpPort, distPort);
      exportEndpoint('rabbitmq', state.rabbitmq.url);
    },
  };
  const results = await Promise.allSettled(
    services.map(async (name) => {
      const t0 = Date.now();
      await start[name]();
      const which =
        name === 'sqs'
          ? ` (${sqsEmulator()})`
          : name === 'kafka'
            ? ` ${KAFKA_VERSIONS[kafkaMajor()].version}`
            : name === 'rabbitmq'
              ? ` (${state.rabbitmq?.nodeName ?? ''})`
              : name === 'pgbouncer'
                ? ` (${state.pgbouncer ? await pgBouncerVersion(state.pgbouncer.binary) : ''}, transaction mode)`
                : ` ${(state.postgres && (await postgresMajor(state.postgres.bindir))) ?? ''}`;
      timings.push(`${name}${which} ${seconds(Date.now() - t0)}`);
    }),
  );
  writeState(state);

  const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
  if (failures.length) {
    // Jest skips global teardown when setup throws, so clean up here.
    await stopNative(state);
    throw new Error(
      `Test services failed to start:\n\n${failures.map((e) => e.message).join('\n\n')}`,
    );
  }
  console.log(
    `[services] native: ${timings.join(', ')}; total ${seconds(Date.now() - started)} (${root})`,
  );
}

/**
 * Stops everything a state file names and removes its directory. Crash-stops
 * (SIGKILL, immediate) are fine: the data is deleted right after.
 * EO_KEEP_SERVICES_DIR=1 keeps the directory (logs) for a post-mortem.
 */
export async function stopNative(state: ServicesState): Promise<void> {
  // Before its server: stopped together, it would log the server's going away.
  if (state.pgbouncer) await pgBouncerStop(state.pgbouncer).catch(() => undefined);
  await Promise.allSettled([
    state.postgres && pgStop(state.postgres, 'immediate'),
    state.elasticmq && stopJava(state.elasticmq, 'SIGKILL'),
    state.localstack && stopJava(state.localstack, 'SIGKILL'),
    state.kafka && stopJava(state.kafka, 'SIGKILL'),
    state.rabbitmq && rabbitMqStop(state.rabbitmq, 'SIGKILL'),
  ]);
  const strays = killProcessesUsing(state.root);
  if (strays.length)
    console.warn(`[services] killed stray processes ${strays.join(', ')} using ${state.root}`);
  if (process.env['EO_KEEP_SERVICES_DIR'] === '1') {
    console.log(`[services] kept ${state.root}`);
  } else {
    fs.rmSync(state.root, { recursive: true, force: true });
  }
}

/**
 * Runs whose jest process died without teardown (killed, Ctrl-C) leave
 * services behind; their state file says what to stop.
 */
async function reapStaleRuns(): Promise<void> {
  if (!fs.existsSync(RUNS_DIR)) return;
  for (const entry of fs.readdirSync(RUNS_DIR)) {
    const file = stateFile(path.join(RUNS_DIR, entry));
    if (!fs.existsSync(file)) continue;
    try {
      const state = readStateFile(file);
      if (state.ownerPid !== process.pid && !isAlive(state.ownerPid)) await stopNative(state);
    } catch {
      /* unreadable or half-removed: leave it */
    }
  }
}
