import type { BrokerName } from '../../kit/services/private.js';
import { parseArgs } from 'node:util';
import { choiceOption, intOption, listOption, numberOption, UsageError } from '../../kit/args.js';
import { failoverArgs } from '../failover/args.js';
import { HANDLER_FAULT_KINDS, type HandlerFaultKind } from './handler-faults.js';
import type { Replication } from '../../kit/services/cluster/node.js';
import type { Control, IsolationLevel } from './protocol.js';
import { DATA_LAYERS, type DataLayerName } from '../../kit/data-layers/index.js';

/**
 * Lambda mode: receives before the queue's redrive policy moves a record to the
 * dead-letter queue (and the consumer's `maxAttempts`). Kills and a Postgres restart
 * add a few receives to the records they hit; a poison record needs them all.
 */
export const LAMBDA_MAX_RECEIVE_COUNT = 8;

/** What one chaos run does; see `usage()`. */
export interface ChaosArgs {
  broker: BrokerName;
  /** Logical messages (distinct idempotency keys) that must each be applied exactly once. */
  messages: number;
  /** Worker processes consuming at the same time. */
  workers: number;
  /** SIGKILLs of workers (random moments and armed fault points). */
  kills: number;
  /** Poison messages: must end in the dead-letter target, never applied. */
  poison: number;
  seed: number;
  /** Producer-side duplicate sends, as a fraction of `messages` (same key, same body). */
  duplicateRatio: number;
  pgRestarts: number;
  brokerRestarts: number;
  /** Batch mode with this maxSize (`batchHandler`); undefined: one transaction per message. */
  batch: number | undefined;
  /** Consumer `concurrency` in each worker. */
  concurrency: number;
  /** Kafka topic partitions. */
  partitions: number;
  /**
   * Producer pace in sends per second (0: as fast as it can). Default: spread the sends
   * over enough time for the planned faults to land while messages flow.
   */
  rate: number | undefined;
  /** Give up (and fail) after this long. */
  timeoutMs: number;
  /** Keep the chaos schema (and its ledger) after a successful run. */
  keep: boolean;
  /** A negative control that must make the run fail (see {@link Control}). */
  control: Control | undefined;
  /** Faulty keys (handler faults, see handler-faults.ts), spread evenly over `faultKinds`. */
  handlerFaults: number;
  faultKinds: HandlerFaultKind[];
  /**
   * Workers' `default_transaction_isolation`: one level for all, `mixed` (even worker
   * slots SERIALIZABLE, odd REPEATABLE READ) or `default` (the database's).
   */
  isolation: IsolationLevel | 'mixed' | 'default';
  /** Kafka `keyConcurrency`; 1 makes each partition one ordered stream, and turns the order check on. */
  keyConcurrency: number;
  /**
   * Kafka `pipeline`: records of an ordering key handed to the runner at once (default:
   * the batch's maxSize, else 1). Above the workers' capacity it puts the partitions
   * under back-pressure.
   */
  pipeline: number | undefined;
  /** Kafka offsets: committed to Kafka, or stored in Postgres with each effect. */
  offsets: 'kafka' | 'postgres';
  /** The Kafka client under the workers' sources (platformatic needs Node >= 22.22). */
  kafkaClient: 'kafkajs' | 'platformatic';
  /** Postgres failovers mid-run (chaos/failover/): a primary with a standby behind a proxy. */
  failovers: number;
  /** The failover cluster's replication (`sync` unless `--replication async`). */
  replication: Replication;
  /**
   * What the handler writes its effect through: `pg` (the consumer's own pg client, the
   * default) or a data layer (kit/data-layers/), whose transaction object `ctx.tx` is.
   */
  dataLayer: DataLayerName;
  /**
   * SQS through AWS Lambda: each worker is an execution environment running
   * `lambdaConsumer` behind kit/lambda's event source mapping; dead letters go through
   * the queue's redrive policy.
   */
  lambda: boolean;
}

export function usage(): string {
  return `usage: tsx chaos/main.ts [--target consumer] --broker sqs|kafka|rabbitmq [options]
       tsx chaos/main.ts --target http|outbox [options]   (their options: --target T --help)

  --messages N        logical messages, each with its own idempotency key (default 1000)
  --workers W         worker processes (default 3)
  --kills K           SIGKILLs of workers, random and at armed fault points (default 5)
  --poison P          poison messages that must be dead-lettered, never applied (default 0)
  --seed S            seed of the plan (default: random, printed)
  --duplicates R      producer duplicate sends as a fraction of N, >= 0.2 (default 0.25)
  --pg-restarts R     Postgres crash-restarts mid-run (default 1)
  --broker-restarts B broker crash-restarts (SIGKILL) mid-run (default 1 for kafka and
                      rabbitmq; sqs: 0 only, ElasticMQ keeps messages in memory)
  --concurrency C     consumer concurrency per worker (default 8)
  --batch M           batch mode: batchHandler, one transaction per batch of up to M (default off)
  --partitions P      Kafka partitions (default 6)
  --key-concurrency K Kafka keyConcurrency (default 4). 1: each partition is one ordered
                      stream, and the checker also checks that every partition's effects
                      were applied in offset order (order_violations=)
  --pipeline N        Kafka pipeline: records of an ordering key handed over at once (default:
                      --batch's maxSize, else 1). partitions x N above the consumer's room
                      (2 x --concurrency per message; (concurrency + 1) x maxSize in batch
                      mode) keeps the partitions under back-pressure
  --offsets WHERE     Kafka offsets: kafka (default) or postgres (stored with each effect)
  --kafka-client C    the workers' Kafka client: kafkajs (default) or platformatic
                      (@platformatic/kafka; run chaos on Node >= 22.22 then)
  --rate R            producer sends per second, 0 = unpaced (default: spread the sends over
                      ~2 s per kill (4 s for kafka) + 8 s per restart, at least 8 s)
  --timeout SECONDS   fail when not quiescent by then (default 120 + N/40)
  --keep              keep the chaos schema after a successful run
  --control doubles|losses
                      negative control: write the effect outside ctx.tx (doubles) or ack
                      inside the handler (losses); the checker must then fail the run
  --handler-faults F  faulty keys, spread evenly over the fault kinds (default N/100, at
                      least 16, at most 400 and N/4; 0 = none). Transient faults fire on a
                      key's first 1-2 runs, then it must be applied once; permanent ones
                      fire every time and the key must be dead-lettered with its code
  --fault-kinds LIST  comma-separated, of swallow (catch a unique violation, return),
                      deferred (FK violated at COMMIT), downstream (ECONNREFUSED from a
                      closed loopback port), backend-killed (pg_terminate_backend mid-
                      handler), serialization (hot pairs: 40001 / 40P01), floating (a
                      query chain through ctx.tx not awaited) (default: all)
  --failovers N       Postgres failovers mid-run: the primary (with a streaming standby,
                      workers behind a proxy) is SIGKILLed, the standby promoted, the proxy
                      pointed at it, a new standby seeded; the first is fired right after
                      a COMMIT is answered (default 0)
  --replication MODE  sync (default) or async: with async, acked COMMITs the standby had
                      not received vanish; lost keys among them are reported as
                      window_lost= and do not fail the run (chaos/README.md)
  --data-layer NAME   what the handler writes through: pg (default: ctx.tx is a pg client),
                      or a data layer, ctx.tx its transaction object: ${DATA_LAYERS.slice(1).join(', ')}.
                      With a layer the effect and the faults go through the layer's raw
                      call, --isolation is the consumer's isolationLevel, and floating is
                      refused (the library cannot guard a layer's transaction object)
  --lambda            sqs only: each worker is a Lambda execution environment (the
                      function is lambdaConsumer, driven by kit/lambda's event source
                      mapping: batches of 10, partial batch responses); dead letters go
                      through the queue's redrive policy (maxReceiveCount ${LAMBDA_MAX_RECEIVE_COUNT})
                      and carry no error code. Not with --batch or --data-layer
  --isolation LEVEL   workers' default_transaction_isolation: default, read-committed,
                      repeatable-read, serializable, or mixed (even workers serializable,
                      odd repeatable read) (default: mixed with serialization faults,
                      else default)

RabbitMQ: a quorum work queue, the source's prefetch = --concurrency, dead letters
through an exchange of the run's own.

Postgres and the broker are started privately unless DATABASE_URL / SQS_ENDPOINT /
KAFKA_BROKERS / RABBITMQ_URL are set; a service given that way cannot be restarted.`;
}

export function parseChaosArgs(argv: string[]): ChaosArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      broker: { type: 'string' },
      messages: { type: 'string' },
      workers: { type: 'string' },
      kills: { type: 'string' },
      poison: { type: 'string' },
      seed: { type: 'string' },
      duplicates: { type: 'string' },
      'pg-restarts': { type: 'string' },
      'broker-restarts': { type: 'string' },
      concurrency: { type: 'string' },
      batch: { type: 'string' },
      partitions: { type: 'string' },
      rate: { type: 'string' },
      timeout: { type: 'string' },
      keep: { type: 'boolean' },
      control: { type: 'string' },
      'handler-faults': { type: 'string' },
      'fault-kinds': { type: 'string' },
      isolation: { type: 'string' },
      'key-concurrency': { type: 'string' },
      pipeline: { type: 'string' },
      offsets: { type: 'string' },
      'kafka-client': { type: 'string' },
      failovers: { type: 'string' },
      replication: { type: 'string' },
      'data-layer': { type: 'string' },
      lambda: { type: 'boolean' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) throw new UsageError('');
  const broker = values.broker;
  if (broker !== 'sqs' && broker !== 'kafka' && broker !== 'rabbitmq')
    throw new UsageError('--broker must be sqs, kafka or rabbitmq');
  const messages = intOption('messages', values.messages, 1000, 1, 10_000_000);
  const brokerRestarts = intOption(
    'broker-restarts',
    values['broker-restarts'],
    broker === 'sqs' ? 0 : 1,
    0,
    10,
  );
  if (broker === 'sqs' && brokerRestarts > 0) {
    throw new UsageError(
      '--broker-restarts: ElasticMQ keeps messages in memory, a restart loses them by design; only Kafka and RabbitMQ restart',
    );
  }
  const duplicateRatio = numberOption('duplicates', values.duplicates, 0.25, 0.2, 10);
  const control = values.control;
  if (control !== undefined && control !== 'doubles' && control !== 'losses')
    throw new UsageError('--control must be doubles or losses');
  if (control === 'losses' && broker !== 'sqs')
    throw new UsageError(
      '--control losses is for sqs (a Kafka ack inside the handler would confuse the offset tracker, not lose the record)',
    );
  const handlerFaults = intOption(
    'handler-faults',
    values['handler-faults'],
    Math.min(400, Math.max(16, Math.ceil(messages / 100)), Math.floor(messages / 4)),
    0,
    Math.floor(messages / 2),
  );
  const dataLayer = choiceOption('data-layer', values['data-layer'], DATA_LAYERS, 'pg');
  if (dataLayer !== 'pg' && values['fault-kinds']?.split(',').some((k) => k.trim() === 'floating'))
    throw new UsageError(
      `--fault-kinds floating is for --data-layer pg: ${dataLayer}'s transaction object is the layer's own, the library cannot refuse a query left floating on it`,
    );
  const faultKinds = listOption(
    'fault-kinds',
    values['fault-kinds'],
    dataLayer === 'pg' ? HANDLER_FAULT_KINDS : LAYER_FAULT_KINDS,
  );
  const offsets = values.offsets ?? 'kafka';
  if (offsets !== 'kafka' && offsets !== 'postgres')
    throw new UsageError('--offsets must be kafka or postgres');
  const kafkaClient = values['kafka-client'] ?? 'kafkajs';
  if (kafkaClient !== 'kafkajs' && kafkaClient !== 'platformatic')
    throw new UsageError('--kafka-client must be kafkajs or platformatic');
  if (
    broker !== 'kafka' &&
    (offsets !== 'kafka' ||
      values['key-concurrency'] !== undefined ||
      values.pipeline !== undefined ||
      values['kafka-client'] !== undefined)
  )
    throw new UsageError(
      '--offsets, --key-concurrency, --pipeline and --kafka-client are for --broker kafka',
    );
  const isolation = isolationOf(
    values.isolation,
    handlerFaults > 0 && faultKinds.includes('serialization') ? 'mixed' : 'default',
  );
  const lambda = values.lambda === true;
  if (lambda && (broker !== 'sqs' || values.batch !== undefined || dataLayer !== 'pg'))
    throw new UsageError('--lambda is for --broker sqs, without --batch or --data-layer');
  const { failovers, replication } = failoverArgs(values.failovers, values.replication);
  return {
    lambda,
    dataLayer,
    failovers,
    replication,
    control,
    handlerFaults,
    faultKinds,
    isolation,
    broker,
    messages,
    workers: intOption('workers', values.workers, 3, 1, 64),
    kills: intOption('kills', values.kills, 5, 0, 100_000),
    poison: intOption('poison', values.poison, 0, 0, 100_000),
    seed: intOption('seed', values.seed, Math.floor(Math.random() * 2 ** 31), 0, 2 ** 32 - 1),
    duplicateRatio,
    pgRestarts: intOption('pg-restarts', values['pg-restarts'], 1, 0, 10),
    brokerRestarts,
    concurrency: intOption('concurrency', values.concurrency, 8, 1, 1000),
    batch: values.batch === undefined ? undefined : intOption('batch', values.batch, 10, 1, 1000),
    partitions: intOption('partitions', values.partitions, 6, 1, 1000),
    rate: values.rate === undefined ? undefined : intOption('rate', values.rate, 0, 0, 1_000_000),
    timeoutMs:
      intOption('timeout', values.timeout, Math.ceil(120 + messages / 40), 1, 86_400) * 1000,
    keep: values.keep === true,
    keyConcurrency: intOption('key-concurrency', values['key-concurrency'], 4, 1, 1000),
    pipeline:
      values.pipeline === undefined
        ? undefined
        : intOption('pipeline', values.pipeline, 1, 1, 1000),
    offsets,
    kafkaClient,
  };
}

/**
 * Handler faults a data layer takes: all but `floating`. A query left floating on
 * `ctx.tx` is refused by the library on its own pg client (EO_TX_CONTROL); a layer's
 * transaction object is the layer's, the library cannot seal it, so what a floating
 * query does after the handler returned is the layer's (its bridge tests say what) and a
 * permanent one has no end the checker could expect.
 */
const LAYER_FAULT_KINDS: readonly HandlerFaultKind[] = HANDLER_FAULT_KINDS.filter(
  (kind) => kind !== 'floating',
);

const ISOLATION: Record<string, ChaosArgs['isolation']> = {
  default: 'default',
  mixed: 'mixed',
  'read-committed': 'read committed',
  'repeatable-read': 'repeatable read',
  serializable: 'serializable',
};

function isolationOf(
  raw: string | undefined,
  fallback: ChaosArgs['isolation'],
): ChaosArgs['isolation'] {
  if (raw === undefined) return fallback;
  const level = ISOLATION[raw];
  if (level === undefined)
    throw new UsageError(`--isolation must be one of ${Object.keys(ISOLATION).join(', ')}`);
  return level;
}
