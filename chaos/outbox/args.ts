import { parseArgs } from 'node:util';
import { intOption, numberOption, UsageError } from '../../kit/args.js';
import { failoverArgs } from '../failover/args.js';
import type { Replication } from '../../kit/services/cluster/node.js';
import {
  INPUT_BROKER,
  OUTBOX_CONTROLS,
  OUTBOX_PUBLISHERS,
  type OutboxControl,
  type OutboxPublisherName,
} from './shared.js';

/** What one outbox chaos run does; see `outboxUsage()`. */
export interface OutboxChaosArgs {
  target: 'outbox';
  /** What the relays publish with, and so what service B is (and A's input broker). */
  publisher: OutboxPublisherName;
  /** The broker service A consumes from: Kafka for the Kafka publisher, else SQS. */
  broker: 'kafka' | 'sqs';
  /** Logical operations sent to service A, each to reach service B exactly once. */
  operations: number;
  /** Accounts (ordering keys) the operations are spread over. */
  accounts: number;
  /** Share of operations the producer sends twice (same idempotency key). */
  duplicateRatio: number;
  /** Operations whose outbox rows are refused (and park) until the run fixes the cause. */
  poison: number;
  /** Longest random pause in A's transactions between the enqueue and the COMMIT, ms. */
  hotDelayMs: number;
  /** Processes of each kind: service A consumers, relays (half per destination set), service B. */
  aWorkers: number;
  relays: number;
  bWorkers: number;
  /** SIGKILLs, spread over relays, A and B workers in turn. */
  kills: number;
  pgRestarts: number;
  /** Kafka SIGKILL + restarts (private Kafka, --publisher kafka only). */
  brokerRestarts: number;
  partitions: number;
  leaseMs: number;
  seed: number;
  timeoutMs: number;
  keep: boolean;
  /** Negative control: break the pipeline on purpose; the run must fail. */
  control: OutboxControl | undefined;
  /** Postgres failovers (chaos/failover/): A, relays and B reach a primary with a standby through a proxy. */
  failovers: number;
  /** The failover cluster's replication (`sync` unless `--replication async`). */
  replication: Replication;
}

export function outboxUsage(): string {
  return `usage: tsx chaos/main.ts --target outbox [--publisher kafka|sqs|http] [options]

Service A (consumer processes) applies each operation and enqueues an outbox row in
the same transaction (ordering key = account); relay processes of two destination sets
(each account's rows go to one) publish the rows; service B applies the downstream
effect once per outbox id. Relays, A and B processes are SIGKILLed at random moments and
restarted; Postgres is crash-restarted; poison rows park and are requeued once the run
"fixes" them. The checker wants every operation applied exactly once by A and by B,
and B's apply order per account = A's commit order.

  --publisher P       kafka (default): Kafka in and out, B a kafkaSource consumer;
                      sqs: SQS in, an SQS FIFO queue out, B an sqsSource consumer;
                      http: SQS in, B an HTTP receiver that dedups on Idempotency-Key
                      and answers 503 or drops the connection now and then
  --operations N      logical operations (default 2000)
  --accounts K        accounts = ordering keys (default 20)
  --duplicates R      share of operations the producer sends twice, 0 to 1 (default 0.1)
  --poison P          operations whose rows park until fixed (default N/500, at least 2)
  --hot-delay MS      longest pause in A's transaction after its enqueue (default 5)
  --a-workers W       service A consumer processes (default 2)
  --relays R          relay processes, at least 2: even slots publish one destination
                      set, odd slots the other (default 2)
  --b-workers W       service B processes (default 2)
  --kills K           SIGKILLs, relay / A / B in turn (default 6)
  --pg-restarts P     Postgres crash-restarts (default 1)
  --broker-restarts B Kafka SIGKILL + restarts, --publisher kafka only (default 0)
  --partitions P      partitions of each topic (default 4)
  --lease MS          the relays' leaseMs (default 3000)
  --failovers N       Postgres failovers: A, the relays and B reach a primary with a
                      streaming standby through a proxy; the primary is SIGKILLed, the
                      standby promoted, the proxy moved; the first right after a COMMIT
                      was answered, before its sender heard it (default 0)
  --replication MODE  sync (default) or async: with async, operations lost with the
                      old primary are window_lost= and do not fail the run
  --seed S            seed of the plan (default: random)
  --timeout SECONDS   give up waiting for quiescence then (default 120 + N/50)
  --keep              keep the chaos schema after a successful run
  --control C         negative control, the run must fail: unordered (no ordering key),
                      enqueue-order (enqueue without the key lock), offset-key (kafka:
                      B dedups by topic/partition/offset) or no-dedup (http: the
                      receiver ignores Idempotency-Key)

Postgres and the brokers are started privately unless DATABASE_URL / KAFKA_BROKERS /
SQS_ENDPOINT are set.`;
}

export function parseOutboxChaosArgs(argv: string[]): OutboxChaosArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      target: { type: 'string' },
      publisher: { type: 'string' },
      broker: { type: 'string' },
      poison: { type: 'string' },
      'hot-delay': { type: 'string' },
      operations: { type: 'string' },
      accounts: { type: 'string' },
      duplicates: { type: 'string' },
      'a-workers': { type: 'string' },
      relays: { type: 'string' },
      'b-workers': { type: 'string' },
      kills: { type: 'string' },
      'pg-restarts': { type: 'string' },
      'broker-restarts': { type: 'string' },
      partitions: { type: 'string' },
      lease: { type: 'string' },
      seed: { type: 'string' },
      timeout: { type: 'string' },
      keep: { type: 'boolean' },
      control: { type: 'string' },
      failovers: { type: 'string' },
      replication: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) throw new UsageError('');
  if (values.target !== 'outbox') throw new UsageError('--target must be outbox');
  const publisher = (values.publisher ?? 'kafka') as OutboxPublisherName;
  if (!OUTBOX_PUBLISHERS.includes(publisher))
    throw new UsageError(`--publisher must be one of ${OUTBOX_PUBLISHERS.join(', ')}`);
  const broker = INPUT_BROKER[publisher];
  if (values.broker !== undefined && values.broker !== broker)
    throw new UsageError(`--publisher ${publisher} takes its input from ${broker}`);
  const control = values.control as OutboxControl | undefined;
  const controls = OUTBOX_CONTROLS[publisher];
  if (control !== undefined && !controls.includes(control))
    throw new UsageError(
      `--control for --publisher ${publisher} must be one of ${controls.join(', ')}`,
    );
  const brokerRestarts = intOption('broker-restarts', values['broker-restarts'], 0, 0, 10);
  if (brokerRestarts > 0 && broker !== 'kafka')
    throw new UsageError(
      '--broker-restarts needs --publisher kafka (ElasticMQ keeps messages in memory)',
    );
  const operations = intOption('operations', values.operations, 2000, 1, 1_000_000);
  const duplicates = numberOption('duplicates', values.duplicates, 0.1, 0, 1);
  return {
    target: 'outbox',
    publisher,
    broker,
    operations,
    accounts: intOption('accounts', values.accounts, 20, 1, 100_000),
    duplicateRatio: duplicates,
    poison: intOption(
      'poison',
      values.poison,
      Math.min(Math.max(2, Math.floor(operations / 500)), Math.floor(operations / 10)),
      0,
      Math.floor(operations / 10),
    ),
    hotDelayMs: intOption('hot-delay', values['hot-delay'], 5, 0, 1000),
    aWorkers: intOption('a-workers', values['a-workers'], 2, 1, 32),
    relays: intOption('relays', values.relays, 2, 2, 32),
    bWorkers: intOption('b-workers', values['b-workers'], 2, 1, 32),
    kills: intOption('kills', values.kills, 6, 0, 1000),
    pgRestarts: intOption('pg-restarts', values['pg-restarts'], 1, 0, 10),
    brokerRestarts,
    partitions: intOption('partitions', values.partitions, 4, 1, 64),
    leaseMs: intOption('lease', values.lease, 3000, 1000, 3_600_000),
    seed: intOption('seed', values.seed, Math.floor(Math.random() * 2 ** 31), 0, 2 ** 32 - 1),
    timeoutMs:
      intOption('timeout', values.timeout, Math.ceil(120 + operations / 50), 1, 86_400) * 1000,
    keep: values.keep === true,
    control,
    ...failoverArgs(values.failovers, values.replication),
  };
}
