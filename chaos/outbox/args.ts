import { parseArgs } from 'node:util';
import { intOption, UsageError } from '../args.js';
import { OUTBOX_CONTROLS, type OutboxControl } from './shared.js';

/** What one outbox chaos run does; see `outboxUsage()`. */
export interface OutboxChaosArgs {
  target: 'outbox';
  broker: 'kafka';
  /** Logical operations sent to service A, each to reach service B exactly once. */
  operations: number;
  /** Accounts (ordering keys) the operations are spread over. */
  accounts: number;
  /** Share of operations the producer sends twice (same idempotency key). */
  duplicateRatio: number;
  /** Processes of each kind: service A consumers, relays, service B consumers. */
  aWorkers: number;
  relays: number;
  bWorkers: number;
  /** SIGKILLs, spread over relays, A and B workers in turn. */
  kills: number;
  pgRestarts: number;
  /** Kafka SIGKILL + restarts (private Kafka only). */
  brokerRestarts: number;
  partitions: number;
  leaseMs: number;
  seed: number;
  timeoutMs: number;
  keep: boolean;
  /** Negative control: break the pipeline on purpose; the run must fail. */
  control: OutboxControl | undefined;
}

export function outboxUsage(): string {
  return `usage: tsx chaos/main.ts --target outbox [--broker kafka] [options]

Service A (consumer processes) applies each operation and enqueues an outbox row in
the same transaction (ordering key = account); relay processes publish the rows to a
second topic; service B (consumer processes, dedup key = the outbox id) applies the
downstream effect. Relays, A and B workers are SIGKILLed at random moments and
restarted; Postgres is crash-restarted. The checker wants every operation applied
exactly once by A and by B, and B's apply order per account = A's commit order.

  --operations N      logical operations (default 2000)
  --accounts K        accounts = ordering keys (default 20)
  --duplicates R      share of operations the producer sends twice, 0 to 1 (default 0.1)
  --a-workers W       service A consumer processes (default 2)
  --relays R          relay processes (default 2)
  --b-workers W       service B consumer processes (default 2)
  --kills K           SIGKILLs, relay / A / B in turn (default 6)
  --pg-restarts P     Postgres crash-restarts (default 1)
  --broker-restarts B Kafka SIGKILL + restarts (default 0)
  --partitions P      partitions of each topic (default 4)
  --lease MS          the relays' leaseMs (default 3000)
  --seed S            seed of the plan (default: random)
  --timeout SECONDS   give up waiting for quiescence then (default 120 + N/50)
  --keep              keep the chaos schema after a successful run
  --control C         negative control, the run must fail: offset-key (B dedups by
                      topic/partition/offset, not the outbox id) or unordered (no
                      ordering key on the outbox rows)

Only Kafka (record key = ordering key keeps the per-key order to the consumer);
Postgres and Kafka are started privately unless DATABASE_URL / KAFKA_BROKERS are set.`;
}

export function parseOutboxChaosArgs(argv: string[]): OutboxChaosArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      target: { type: 'string' },
      broker: { type: 'string' },
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
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) throw new UsageError('');
  if (values.target !== 'outbox') throw new UsageError('--target must be outbox');
  if ((values.broker ?? 'kafka') !== 'kafka')
    throw new UsageError('--target outbox runs on --broker kafka only (see chaos/README.md)');
  const control = values.control as OutboxControl | undefined;
  if (control !== undefined && !OUTBOX_CONTROLS.includes(control))
    throw new UsageError(`--control must be one of ${OUTBOX_CONTROLS.join(', ')}`);
  const operations = intOption('operations', values.operations, 2000, 1, 1_000_000);
  const duplicates = Number(values.duplicates ?? '0.1');
  if (!Number.isFinite(duplicates) || duplicates < 0 || duplicates > 1)
    throw new UsageError('--duplicates must be a number from 0 to 1');
  return {
    target: 'outbox',
    broker: 'kafka',
    operations,
    accounts: intOption('accounts', values.accounts, 20, 1, 100_000),
    duplicateRatio: duplicates,
    aWorkers: intOption('a-workers', values['a-workers'], 2, 1, 32),
    relays: intOption('relays', values.relays, 2, 1, 32),
    bWorkers: intOption('b-workers', values['b-workers'], 2, 1, 32),
    kills: intOption('kills', values.kills, 6, 0, 1000),
    pgRestarts: intOption('pg-restarts', values['pg-restarts'], 1, 0, 10),
    brokerRestarts: intOption('broker-restarts', values['broker-restarts'], 0, 0, 10),
    partitions: intOption('partitions', values.partitions, 4, 1, 64),
    leaseMs: intOption('lease', values.lease, 3000, 1000, 3_600_000),
    seed: intOption('seed', values.seed, Math.floor(Math.random() * 2 ** 31), 0, 2 ** 32 - 1),
    timeoutMs:
      intOption('timeout', values.timeout, Math.ceil(120 + operations / 50), 1, 86_400) * 1000,
    keep: values.keep === true,
    control,
  };
}
