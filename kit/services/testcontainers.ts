/**
 * EO_TEST_PROVIDER=testcontainers: the same three endpoints from containers,
 * for machines with a Docker engine. Imported lazily by lifecycle.ts only.
 * Containers are stopped by teardown (same process, handles kept on
 * globalThis) or, if jest dies, by testcontainers' reaper. Chaos helpers
 * (restartPostgres, stopKafka...) are native-only.
 */
import path from 'node:path';
import type { StartedTestContainer } from 'testcontainers';
import { repoRoot } from './maven.js';
import { freePorts, HOST } from './ports.js';
import { exportEndpoint, type ServiceName } from './setup.js';

/**
 * Pinned images, overridable per service. LocalStack 3.8 is the last line that
 * runs without an auth token; newer images require LOCALSTACK_AUTH_TOKEN.
 */
const IMAGES = {
  postgres: process.env['EO_POSTGRES_IMAGE'] ?? 'postgres:16-alpine',
  localstack: process.env['EO_LOCALSTACK_IMAGE'] ?? 'localstack/localstack:3.8',
  redpanda: process.env['EO_REDPANDA_IMAGE'] ?? 'redpandadata/redpanda:v24.2.7',
};

const KEY = Symbol.for('effectively-once.test.containers');
type Holder = { [KEY]?: StartedTestContainer[] };

export async function startContainers(services: ServiceName[]): Promise<void> {
  const started: StartedTestContainer[] = [];
  (globalThis as Holder)[KEY] = started;
  const start: Record<ServiceName, () => Promise<void>> = {
    postgres: async () => {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      const pg = await new PostgreSqlContainer(IMAGES.postgres)
        .withDatabase('effectively_once')
        // As the native cluster (postgres.ts): no fsync, synchronous_commit left on.
        .withCommand(['postgres', '-c', 'fsync=off', '-c', 'max_connections=300'])
        .start();
      started.push(pg);
      exportEndpoint('postgres', pg.getConnectionUri());
    },
    sqs: async () => {
      const { LocalstackContainer } = await import('@testcontainers/localstack');
      const localstack = await new LocalstackContainer(IMAGES.localstack)
        .withEnvironment({ SERVICES: 'sqs', AWS_DEFAULT_REGION: 'us-east-1' })
        // Init hook creating the standard, FIFO and dead-letter queues.
        .withCopyDirectoriesToContainer([
          {
            source: path.join(repoRoot, 'localstack', 'init', 'ready.d'),
            target: '/etc/localstack/init/ready.d',
            mode: 0o755,
          },
        ])
        .start();
      started.push(localstack);
      exportEndpoint('sqs', localstack.getConnectionUri());
    },
    kafka: async () => {
      // Kafka clients connect to the advertised address, which must be known before
      // start: bind the same free port on host and container and advertise it.
      const { GenericContainer, Wait } = await import('testcontainers');
      const [port] = await freePorts(1);
      const host = process.env['EO_DOCKER_HOST_ADDRESS'] ?? HOST;
      const redpanda = await new GenericContainer(IMAGES.redpanda)
        .withExposedPorts({ container: port!, host: port! })
        .withCommand([
          'redpanda',
          'start',
          '--mode',
          'dev-container',
          '--smp',
          '1',
          '--overprovisioned',
          '--kafka-addr',
          `PLAINTEXT://0.0.0.0:${port}`,
          '--advertise-kafka-addr',
          `PLAINTEXT://${host}:${port}`,
        ])
        .withWaitStrategy(Wait.forLogMessage(/Successfully started Redpanda/))
        .start();
      started.push(redpanda);
      exportEndpoint('kafka', `${host}:${port}`);
    },
    pgbouncer: () =>
      Promise.reject(
        new Error('pgbouncer runs natively only (Debian package): unset EO_TEST_PROVIDER'),
      ),
    rabbitmq: () =>
      Promise.reject(
        new Error('rabbitmq runs natively only (Debian package): unset EO_TEST_PROVIDER'),
      ),
  };
  const results = await Promise.allSettled(services.map((name) => start[name]()));
  const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
  if (failures.length) {
    await stopContainers();
    throw new Error(
      `Test containers failed to start:\n\n${failures.map((e) => e.message).join('\n\n')}`,
    );
  }
}

export async function stopContainers(): Promise<void> {
  const holder = globalThis as Holder;
  const containers = holder[KEY] ?? [];
  delete holder[KEY];
  await Promise.allSettled(containers.map((c) => c.stop()));
}
