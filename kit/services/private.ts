import fs from 'node:fs';
import path from 'node:path';
/** The brokers a run can start: ElasticMQ (SQS), Kafka or RabbitMQ. */
export type BrokerName = 'sqs' | 'kafka' | 'rabbitmq';
import type { FailoverCluster, FailoverOptions, FailoverReport } from './cluster/cluster.js';
import type { Replication } from './cluster/node.js';

/** Postgres and the broker for a chaos run, with what may be restarted. */
export interface ChaosServices {
  databaseUrl: string;
  /** SQS endpoint, comma-separated Kafka brokers or an AMQP URL ('' for the HTTP target: no broker). */
  brokerEndpoint: string;
  /** False when DATABASE_URL was given: someone else's Postgres is not ours to crash. */
  canRestartPostgres: boolean;
  /**
   * False when KAFKA_BROKERS / RABBITMQ_URL was given (and always for SQS: ElasticMQ keeps
   * messages in memory).
   */
  canRestartBroker: boolean;
  /** The services this run started itself (`postgres`, `sqs`, `kafka`, `rabbitmq`); the rest were given. */
  started: string[];
  /** Where the private services live (state file, logs), when any were started. */
  root: string | undefined;
  /** Crash (immediate stop), stay down `downMs`, start again. */
  restartPostgres(downMs: number): Promise<void>;
  /** Kafka and RabbitMQ: SIGKILL the broker, stay down `downMs`, start it again. */
  restartBroker(downMs: number): Promise<void>;
  /** With `--failovers`: the primary, its standby and the proxy `databaseUrl` points at. */
  cluster: FailoverCluster | undefined;
  /** Fails the cluster's primary over to its standby (`--failovers` only). */
  failover(options: FailoverOptions): Promise<FailoverReport>;
  /** Stops what this run started. */
  stop(): Promise<void>;
}

const BROKER_ENV: Record<BrokerName, string> = {
  sqs: 'SQS_ENDPOINT',
  kafka: 'KAFKA_BROKERS',
  rabbitmq: 'RABBITMQ_URL',
};

/**
 * Uses DATABASE_URL and SQS_ENDPOINT / KAFKA_BROKERS when set, and starts what is
 * missing privately (`broker` null: Postgres alone, for the HTTP target) with the integration tests' native service helpers (a run
 * directory of its own, free ports), so it can crash and restart them without
 * disturbing anybody else.
 */
export async function ensureServices(
  broker: BrokerName | null,
  log: (line: string) => void,
  /** Postgres as a failover cluster (chaos/failover/) instead of one server. */
  failover?: { replication: Replication },
): Promise<ChaosServices> {
  if (failover !== undefined && process.env['DATABASE_URL'])
    throw new Error('--failovers needs a Postgres of its own: unset DATABASE_URL');
  const brokerEnv = broker === null ? undefined : BROKER_ENV[broker];
  const missing = [
    ...(process.env['DATABASE_URL'] || failover ? [] : ['postgres']),
    ...(broker === null || process.env[brokerEnv ?? ''] ? [] : [broker]),
  ];
  const envNames = ['DATABASE_URL', ...(brokerEnv ? [brokerEnv] : [])].join(' / ');
  const services = await import('./index.js');
  let root: string | undefined;
  if (missing.length > 0) {
    log(`starting private ${missing.join(' and ')} (set ${envNames} to use your own)`);
    // The helpers read these; a parent's (e.g. jest's) services must not be reused or restarted.
    delete process.env['EO_SERVICES_STATE'];
    process.env['EO_SERVICES'] = missing.join(',');
    process.env['EO_TEST_PROVIDER'] = 'native';
    await services.startServices();
    root = services.servicesState()?.root;
  }
  const ownRoot = failover !== undefined && root === undefined;
  const cluster = failover && (await startCluster(root, failover.replication, log));
  root ??= cluster && path.dirname(cluster.root);
  const databaseUrl = cluster?.url ?? process.env['DATABASE_URL'];
  const brokerEndpoint = brokerEnv === undefined ? '' : process.env[brokerEnv];
  if (!databaseUrl || brokerEndpoint === undefined || (brokerEnv && !brokerEndpoint))
    throw new Error(`${envNames} still unset after starting services`);
  const canRestartPostgres = missing.includes('postgres') || cluster !== undefined;
  const canRestartBroker = broker !== null && broker !== 'sqs' && missing.includes(broker);
  return {
    databaseUrl,
    brokerEndpoint,
    started: missing,
    canRestartPostgres,
    canRestartBroker,
    root,
    async restartPostgres(downMs) {
      if (!canRestartPostgres)
        throw new Error('Postgres was given (DATABASE_URL): it cannot be restarted');
      if (cluster) await cluster.restartPrimary(downMs);
      else await services.restartPostgres({ mode: 'immediate', downMs });
    },
    async restartBroker(downMs) {
      if (!canRestartBroker)
        throw new Error('the broker cannot be restarted (given endpoint, or SQS)');
      if (broker === 'rabbitmq') await services.restartRabbitMq({ signal: 'SIGKILL', downMs });
      else await services.restartKafka({ signal: 'SIGKILL', downMs });
    },
    cluster,
    async failover(options) {
      if (!cluster) throw new Error('no failover cluster in this run (--failovers)');
      return cluster.failover(options);
    },
    async stop() {
      await cluster?.stop();
      if (ownRoot && root) fs.rmSync(root, { recursive: true, force: true });
      if (missing.length > 0) await services.stopServices();
    },
  };
}

/**
 * The failover cluster, inside the private services' run directory when there is one
 * (so their teardown, and CI's leak check, cover it), else in a run directory of its own.
 */
async function startCluster(
  servicesRoot: string | undefined,
  replication: Replication,
  log: (line: string) => void,
): Promise<FailoverCluster> {
  const { FailoverCluster } = await import('./cluster/cluster.js');
  const { RUNS_DIR } = await import('./state.js');
  fs.mkdirSync(RUNS_DIR, { recursive: true });
  const root = servicesRoot ?? fs.mkdtempSync(path.join(RUNS_DIR, 'run-'));
  fs.chmodSync(root, 0o755); // the postgres user must reach the data dirs inside
  const t0 = Date.now();
  const cluster = await FailoverCluster.start(path.join(root, 'failover'), replication, (line) =>
    log(`failover cluster: ${line}`),
  );
  log(
    `failover cluster (${replication}) up in ${Date.now() - t0} ms; workers use proxy port ${cluster.proxy.port}`,
  );
  return cluster;
}
