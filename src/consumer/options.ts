import type { Pool } from 'pg';
import type { IsolationLevel } from '../store/claim.js';
import type { ConsumerTelemetry } from './telemetry.js';
import type {
  Backoff,
  BatchHandler,
  Delivery,
  Handler,
  Logger,
  MismatchPolicy,
  Source,
} from '../types.js';

/** Options of {@link createConsumer}. */
export interface ConsumerOptions<T> {
  /**
   * Dedup namespace written to `processed_messages.consumer`; two consumers each process
   * a message once. Changing it starts an empty namespace: a message the old name applied
   * and the broker delivers again after the rename is applied again. To rename, stop the
   * old name's workers and copy its claims first (`examples/sql/rename-consumer.sql`).
   */
  name: string;
  /** Broker adapter: `sqsSource(...)`, `kafkaSource(...)` or `memorySource()`. */
  source: Source<T>;
  /** pg pool of the database that holds both the dedup table and the handler's effects. */
  pool: Pool;
  /**
   * The effect, per message. Runs inside the claim's transaction; throw to roll back
   * and retry. In batch mode it runs once per new message inside the batch transaction.
   * Give either `handler` or `batchHandler`.
   */
  handler?: Handler<T>;
  /**
   * Batch mode's effect: receives only the messages whose keys were newly claimed, in
   * delivery order, inside one transaction with all their claims. Implies `batch`.
   */
  batchHandler?: BatchHandler<T>;
  /**
   * Batch mode: one transaction claims (one `INSERT ... SELECT FROM unnest(...)`) and
   * applies up to `maxSize` deliveries; all are acked after the one COMMIT. A failing
   * batch is split in halves until the failing delivery is alone, so one poison
   * message cannot stall the rest. Default: off (one transaction per message).
   */
  batch?: { maxSize?: number; maxWaitMs?: number };
  /** Schema of the dedup table. Default `public`. */
  schema?: string;
  /** Name of the dedup table. Default `processed_messages`. */
  table?: string;
  /** Deliveries processed at once (each holds one pool connection). Default 10, 1..1000. */
  concurrency?: number;
  /** Derives the dedup key from a delivery, overriding the adapter's choice. */
  key?: (delivery: Delivery<T>) => string | undefined;
  /**
   * Longest accepted key, in UTF-16 code units. Default 255, 1..8192. Keys over
   * `MAX_KEY_BYTES` (1800) UTF-8 bytes are rejected whatever this allows.
   */
  maxKeyLength?: number;
  /** Store a sha256 of the payload and detect a key reused with another payload. Default true. */
  payloadHash?: boolean;
  /** What to do on a payload mismatch: `dead-letter` (default) or `ack` (treat as duplicate). */
  onMismatch?: MismatchPolicy;
  /** Attempts before dead-lettering a failing delivery. Default 5, 1..1000. */
  maxAttempts?: number;
  /** Delay before a retry. Default exponential from 1 s to 5 min with full jitter. */
  backoff?: Backoff;
  /** How long a claim may wait for a concurrent delivery of the same key. Default 5000 ms. */
  lockTimeoutMs?: number;
  /** Abort and roll back a handler running longer than this. Default 60 000 ms; 0 disables. */
  handlerTimeoutMs?: number;
  /**
   * Isolation level of the claim's transaction (`BEGIN ISOLATION LEVEL ...`). Default:
   * the database's `default_transaction_isolation` (usually read committed).
   */
  isolationLevel?: IsolationLevel;
  /**
   * How many times a transaction that hit a serialization failure or a deadlock
   * (SQLSTATE 40001 / 40P01, in the claim, a handler statement or COMMIT) is rolled back
   * and run again at once, claim and handler, without spending a delivery attempt.
   * Past this, the delivery fails like a handler failure (one attempt). Default 3, 0..100.
   */
  serializationRetries?: number;
  /**
   * Longest wait for a pool connection before a delivery is retried later (no attempt
   * spent). Default 10 000 ms. Give the pool at least `concurrency + 1` connections
   * (more if handlers use the pool themselves).
   */
  acquireTimeoutMs?: number;
  /** Delay before retrying a delivery whose claim was busy. Default 2000 ms. */
  busyRetryDelayMs?: number;
  /** Run {@link migrate} for the dedup table on `start()`. Default true. */
  migrate?: boolean;
  /** pino-compatible logger. Default: silent. */
  logger?: Logger;
  /**
   * Dedup window: rows older than `olderThanMs` are pruned in the background every
   * `intervalMs` (default 60 000), `batchSize` rows per DELETE (default 1000), busy at
   * most `dutyCycle` of the time (default 0.5: after each batch it waits as long as the
   * batch took, so a large backlog never takes the database from the claims). Default:
   * never pruned.
   */
  retention?: { olderThanMs: number; intervalMs?: number; batchSize?: number; dutyCycle?: number };
  /**
   * Refuse a delivery first sent longer ago than the dedup window keeps a claim: after
   * pruning, such a redelivery could not be told from a new message and would be applied
   * again. The floor reads when the broker says the message was first sent
   * ({@link Delivery.firstSentAt}: SQS `SentTimestamp`, Kafka `LogAppendTime` with
   * kafkajs); a delivery first sent more than `window - marginMs` ago gets the `expired`
   * event and is dead-lettered (`EO_DELIVERY_EXPIRED`), before any claim. Default: on when
   * `retention` is set, for broker timestamps only; `false` turns it off; a delivery
   * without a timestamp is never floored.
   */
  admissionFloor?: boolean | AdmissionFloorOptions;
  /**
   * Tracing and metrics hooks, e.g. `otelTelemetry()` from `effectively-once/otel`
   * (OpenTelemetry spans per delivery or batch, outcome counters, durations). Default:
   * none, and nothing is measured.
   */
  telemetry?: ConsumerTelemetry;
}

/** Options of {@link ConsumerOptions.admissionFloor}. */
export interface AdmissionFloorOptions {
  /**
   * How much younger than the window a delivery must be to be admitted: room for clock
   * skew between the broker, this process and the database, and for the time from
   * admission to the claim (pool wait, lock wait, batch gathering, a failed batch's
   * halves claimed again). Default: a tenth of the window, at most one hour. Must be
   * below the window.
   */
  marginMs?: number;
  /**
   * The window, when this consumer does not prune itself (a `prune()` job or the
   * command line prunes its rows): the `olderThan` of that job, in ms. With `retention`
   * (whose `olderThanMs` is the window otherwise): a shorter window to floor by, at most
   * `retention.olderThanMs`. After a deploy that lengthens `retention`, keep the old
   * window here until the new one has passed since the last old instance stopped: rows
   * written under the old window expire sooner than the new retention says.
   */
  windowMs?: number;
  /**
   * Also floor deliveries whose timestamp the producer set (`firstSentBy: 'producer'`:
   * Kafka `CreateTime`, and every record of the `@platformatic/kafka` client, which does
   * not tell the timestamp type). Only when the producers' clocks are trusted: a clock
   * ahead lets an old record through, one behind dead-letters young records. Default false.
   */
  producerTimestamps?: boolean;
}
