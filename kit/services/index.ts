/**
 * Test services: started once by jest's global setup (integration project),
 * reachable through DATABASE_URL / SQS_ENDPOINT / KAFKA_BROKERS, and
 * controllable from tests for chaos scenarios (outages, crashes, restarts).
 * Chaos helpers work only for services global setup started natively; with a
 * given endpoint or the testcontainers provider they throw.
 */
import { kafkaReady } from './kafka.js';
import { startJava, stopJava } from './java.js';
import { pgStart, pgStop, type PgStopMode } from './postgres.js';
import { sleep } from './process.js';
import { rabbitMqCtl, rabbitMqStart, rabbitMqStop } from './rabbitmq.js';
import { currentState, updateState, type ServicesState } from './state.js';

export { startServices, stopServices } from './lifecycle.js';
export { PRESET_QUEUES, SQS_CREDENTIALS, SQS_REGION } from './elasticmq.js';
export { startPrivateRabbitMq, type PrivateRabbitMq } from './rabbitmq.js';
export type { PgStopMode } from './postgres.js';
export type { ServicesState } from './state.js';

/** The running services' state (pids, ports, data dirs, log files), if global setup started any. */
export function servicesState(): ServicesState | undefined {
  return currentState();
}

function managed<K extends 'postgres' | 'elasticmq' | 'kafka' | 'rabbitmq'>(
  key: K,
): NonNullable<ServicesState[K]> {
  const state = currentState();
  const svc = state?.provider === 'native' ? state[key] : undefined;
  if (!svc) {
    throw new Error(
      `${key} was not started natively by the test global setup (provider: ${state?.provider ?? 'none'}, ` +
        `or its endpoint was given): it cannot be stopped or restarted from tests`,
    );
  }
  return svc;
}

/** Stops Postgres: `fast` (default) is a clean shutdown, `immediate` a crash. Clients see their connections drop. */
export async function stopPostgres(opts: { mode?: PgStopMode } = {}): Promise<void> {
  await pgStop(managed('postgres'), opts.mode ?? 'fast');
}

/** Starts Postgres again (same port, same data) and waits until it accepts connections. */
export async function startPostgres(): Promise<void> {
  await pgStart(managed('postgres'));
}

/** Stop, stay down `downMs` (default 0), start. Resolves once Postgres accepts connections again. */
export async function restartPostgres(
  opts: { mode?: PgStopMode; downMs?: number } = {},
): Promise<void> {
  await stopPostgres(opts);
  await sleep(opts.downMs ?? 0);
  await startPostgres();
}

/** Stops the Kafka broker: SIGTERM (default) is a controlled shutdown, SIGKILL a crash. */
export async function stopKafka(opts: { signal?: 'SIGTERM' | 'SIGKILL' } = {}): Promise<void> {
  await stopJava(managed('kafka'), opts.signal ?? 'SIGTERM');
}

/** Starts the broker again (same ports, same log dir) and waits until an admin client can list topics. */
export async function startKafka(): Promise<void> {
  const kafka = managed('kafka');
  const record = (pid: number): void =>
    updateState((state) => {
      if (state.kafka) state.kafka.pid = pid;
    });
  await startJava(kafka, `Kafka on ${kafka.brokers}`, () => kafkaReady(kafka.brokers), record);
}

/** Stop, stay down `downMs` (default 0), start. */
export async function restartKafka(
  opts: { signal?: 'SIGTERM' | 'SIGKILL'; downMs?: number } = {},
): Promise<void> {
  await stopKafka(opts);
  await sleep(opts.downMs ?? 0);
  await startKafka();
}

/** Stops the RabbitMQ node: SIGTERM (default) a clean shutdown, SIGKILL a crash. */
export async function stopRabbitMq(opts: { signal?: 'SIGTERM' | 'SIGKILL' } = {}): Promise<void> {
  await rabbitMqStop(managed('rabbitmq'), opts.signal ?? 'SIGTERM');
}

/** Starts the node again (same name, port and data) and waits until a client can connect. */
export async function startRabbitMq(): Promise<void> {
  const rabbitmq = managed('rabbitmq');
  await rabbitMqStart(rabbitmq, (pid) =>
    updateState((state) => {
      if (state.rabbitmq) state.rabbitmq.pid = pid;
    }),
  );
}

/** Stop, stay down `downMs` (default 0), start. Durable queues keep their persistent messages. */
export async function restartRabbitMq(
  opts: { signal?: 'SIGTERM' | 'SIGKILL'; downMs?: number } = {},
): Promise<void> {
  await stopRabbitMq(opts);
  await sleep(opts.downMs ?? 0);
  await startRabbitMq();
}

/** The node closes every client connection (as an operator's `rabbitmqctl close_all_connections`). */
export async function closeRabbitMqConnections(reason = 'closed by a test'): Promise<void> {
  await rabbitMqCtl(managed('rabbitmq'), ['close_all_connections', reason]);
}
