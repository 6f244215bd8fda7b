import type { LayerName } from '../../kit/data-layers/index.js';

/** Where the worker processes consume from (sent to each worker at spawn). */
export type WorkerBrokerConfig =
  | {
      kind: 'sqs';
      endpoint: string;
      queueUrl: string;
      deadLetterQueueUrl: string;
      /** Lambda mode: the queue's redrive policy moves a record after this many receives. */
      maxReceiveCount?: number | undefined;
    }
  | { kind: 'kafka'; brokers: string[]; topic: string; groupId: string }
  | { kind: 'rabbitmq'; url: string; queue: string; deadLetterExchange: string };

/** A worker's whole configuration, passed as JSON in the CHAOS_WORKER environment variable. */
export interface WorkerConfig {
  /** Slot number, for the ledger and the logs. */
  index: number;
  databaseUrl: string;
  /** Schema holding the dedup table and the chaos tables. */
  schema: string;
  /** Consumer name (dedup namespace). */
  consumerName: string;
  concurrency: number;
  maxAttempts: number;
  /** Batch mode (`batchHandler`, one transaction per batch) with this `maxSize`; undefined: per message. */
  batch?: number | undefined;
  broker: WorkerBrokerConfig;
  /**
   * `default_transaction_isolation` of the worker's pool (a connection option, so the
   * claim's own BEGIN runs at it); undefined: the database's default.
   */
  isolation?: IsolationLevel | undefined;
  /** Negative control (see ChaosArgs.control): break the handler on purpose. */
  control?: Control | undefined;
  /** Kafka: the source's `keyConcurrency` (1: each partition is one ordered stream). */
  keyConcurrency?: number | undefined;
  /** Kafka: the source's `pipeline` (default: `batch`, else 1). */
  pipeline?: number | undefined;
  /** Kafka: where offsets are kept; `postgres` stores them with the effects (in `schema`). */
  offsets?: 'kafka' | 'postgres' | undefined;
  /** Kafka: the client under the source (default kafkajs). */
  kafkaClient?: 'kafkajs' | 'platformatic' | undefined;
  /**
   * The data layer the handler writes through (`dataLayer`, kit/data-layers/); undefined:
   * the consumer's own pg client, as before. With a layer, `isolation` is the consumer's
   * `isolationLevel` (the claim's first statement sets it) instead of a pool option.
   */
  dataLayer?: LayerName | undefined;
  /**
   * SQS: the worker is a Lambda execution environment (lambda-host.ts): `lambdaConsumer`
   * invoked by kit/lambda's event source mapping, dead letters by the queue's redrive.
   */
  lambda?: boolean | undefined;
}

/**
 * Negative controls, to show the checker catches what it claims to: `doubles` writes
 * the effect outside `ctx.tx` (autocommit), so a kill inside the handler leaves an
 * effect without its claim; `losses` acks the delivery at the start of the handler, so
 * a kill inside the handler loses the message. A control run must fail.
 */
export type Control = 'doubles' | 'losses';

export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

export const WORKER_ENV = 'CHAOS_WORKER';

/**
 * Points where an armed worker SIGKILLs itself:
 * - `after-commit`: the effect's transaction committed, the delivery is not acked yet
 *   (the consumer's `processed` event, emitted between COMMIT and ack);
 * - `in-handler`: the handler wrote its effect in `ctx.tx`, COMMIT not sent;
 * - `during-ack`: a `DeleteMessageBatch` / Kafka offset commit is on the wire (or its
 *   answer arrived and was not yet seen by the adapter); RabbitMQ's `basic.ack` has no
 *   answer: the worker dies just after writing it (it may or may not leave the process).
 */
export type FaultPoint = 'after-commit' | 'in-handler' | 'during-ack';
export const FAULT_POINTS: readonly FaultPoint[] = ['after-commit', 'in-handler', 'during-ack'];

/** Parent → worker. */
export type ToWorker = { type: 'arm'; point: FaultPoint } | { type: 'stop' };

/**
 * Worker → parent. `events`: the consumer's `failed` and `dead-lettered` events since
 * the last report, counted by error code (what the library made of each fault).
 */
export type FromWorker =
  | { type: 'ready' }
  | { type: 'armed'; point: FaultPoint }
  | { type: 'events'; failed: Record<string, number>; deadLettered: Record<string, number> };
