import { parseArgs } from 'node:util';
import type { Control } from './protocol.js';

export type BrokerName = 'sqs' | 'kafka';

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
}

export function usage(): string {
  return `usage: tsx chaos/main.ts --broker sqs|kafka [options]

  --messages N        logical messages, each with its own idempotency key (default 1000)
  --workers W         worker processes (default 3)
  --kills K           SIGKILLs of workers, random and at armed fault points (default 5)
  --poison P          poison messages that must be dead-lettered, never applied (default 0)
  --seed S            seed of the plan (default: random, printed)
  --duplicates R      producer duplicate sends as a fraction of N, >= 0.2 (default 0.25)
  --pg-restarts R     Postgres crash-restarts mid-run (default 1)
  --broker-restarts B Kafka broker crash-restarts mid-run (default 1 for kafka; sqs: 0 only,
                      ElasticMQ keeps messages in memory)
  --concurrency C     consumer concurrency per worker (default 8)
  --batch M           batch mode: batchHandler, one transaction per batch of up to M (default off)
  --partitions P      Kafka partitions (default 6)
  --rate R            producer sends per second, 0 = unpaced (default: spread the sends over
                      ~2 s per kill (4 s for kafka) + 8 s per restart, at least 8 s)
  --timeout SECONDS   fail when not quiescent by then (default 120 + N/40)
  --keep              keep the chaos schema after a successful run
  --control doubles|losses
                      negative control: write the effect outside ctx.tx (doubles) or ack
                      inside the handler (losses); the checker must then fail the run

Postgres and the broker are started privately unless DATABASE_URL / SQS_ENDPOINT /
KAFKA_BROKERS are set; a service given that way cannot be restarted.`;
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
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) throw new UsageError('');
  const broker = values.broker;
  if (broker !== 'sqs' && broker !== 'kafka') throw new UsageError('--broker must be sqs or kafka');
  const messages = int('messages', values.messages, 1000, 1, 10_000_000);
  const brokerRestarts = int(
    'broker-restarts',
    values['broker-restarts'],
    broker === 'kafka' ? 1 : 0,
    0,
    10,
  );
  if (broker === 'sqs' && brokerRestarts > 0) {
    throw new UsageError(
      '--broker-restarts: ElasticMQ keeps messages in memory, a restart loses them by design; only Kafka restarts',
    );
  }
  const duplicateRatio = values.duplicates === undefined ? 0.25 : Number(values.duplicates);
  if (!Number.isFinite(duplicateRatio) || duplicateRatio < 0.2 || duplicateRatio > 10) {
    throw new UsageError('--duplicates must be a number from 0.2 to 10');
  }
  const control = values.control;
  if (control !== undefined && control !== 'doubles' && control !== 'losses')
    throw new UsageError('--control must be doubles or losses');
  if (control === 'losses' && broker !== 'sqs')
    throw new UsageError(
      '--control losses is for sqs (a Kafka ack inside the handler would confuse the offset tracker, not lose the record)',
    );
  return {
    control,
    broker,
    messages,
    workers: int('workers', values.workers, 3, 1, 64),
    kills: int('kills', values.kills, 5, 0, 100_000),
    poison: int('poison', values.poison, 0, 0, 100_000),
    seed: int('seed', values.seed, Math.floor(Math.random() * 2 ** 31), 0, 2 ** 32 - 1),
    duplicateRatio,
    pgRestarts: int('pg-restarts', values['pg-restarts'], 1, 0, 10),
    brokerRestarts,
    concurrency: int('concurrency', values.concurrency, 8, 1, 1000),
    batch: values.batch === undefined ? undefined : int('batch', values.batch, 10, 1, 1000),
    partitions: int('partitions', values.partitions, 6, 1, 1000),
    rate: values.rate === undefined ? undefined : int('rate', values.rate, 0, 0, 1_000_000),
    timeoutMs: int('timeout', values.timeout, Math.ceil(120 + messages / 40), 1, 86_400) * 1000,
    keep: values.keep === true,
  };
}

export class UsageError extends Error {}

function int(
  name: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new UsageError(`--${name} must be an integer from ${min} to ${max}`);
  }
  return value;
}
