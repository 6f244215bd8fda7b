import type { Pool, PoolClient } from 'pg';
import type { Routing } from '../routing/options.js';
import type { DataLayer } from '../data-layer.js';
import type { StoreOptions, TransactionOptions } from '../shared-options.js';
import type { ConsumerTelemetry } from './telemetry.js';
import type { Backoff, BatchHandler, Handler, MismatchPolicy, Source } from '../types.js';

/**
 * Options of {@link createConsumer}. The shared ones (pool, table, retention, timeouts,
 * key length ...) are {@link StoreOptions} and {@link TransactionOptions}; the dedup
 * table defaults to `processed_messages`, and `retention` is off until given: the window
 * must cover the broker's redelivery, which only the operator knows. The dedup key is the
 * source's to derive (its `key` option).
 */
export interface ConsumerOptions<T, Tx = PoolClient>
  extends StoreOptions<ConsumerTelemetry>, TransactionOptions {
  /**
   * pg pool of the database holding `processed_messages` and the handler's effects; or a
   * {@link Routing}: several databases, each delivery's key claimed (and its effect
   * written) in the one its route names (docs/routing.md).
   */
  pool: Pool | Routing<Tx>;
  /**
   * The data layer the claim's transaction runs in (`prismaLayer(prisma)`,
   * `knexLayer(knex)`…): the handler's `ctx.tx` is then its transaction object, typed
   * `Tx`. Absent: a pg client of `pool`.
   */
  dataLayer?: DataLayer<Tx>;
  /**
   * Dedup namespace written to `processed_messages.consumer`; two consumers each process
   * a message once. Changing it starts an empty namespace: a message the old name applied
   * and the broker delivers again after the rename is applied again. To rename, stop the
   * old name's workers and copy its claims first (`examples/sql/rename-consumer.sql`).
   */
  name: string;
  /** Broker adapter: `sqsSource(...)`, `kafkaSource(...)` or `memorySource()`. */
  source: Source<T>;
  /**
   * The effect, per message. Runs inside the claim's transaction; throw to roll back
   * and retry. In batch mode it runs once per new message inside the batch transaction.
   * Give either `handler` or `batchHandler`.
   */
  handler?: Handler<T, Tx>;
  /**
   * Batch mode's effect: receives only the messages whose keys were newly claimed, in
   * delivery order, inside one transaction with all their claims. Implies `batch`.
   */
  batchHandler?: BatchHandler<T, Tx>;
  /**
   * Batch mode: one transaction claims (one `INSERT ... SELECT FROM unnest(...)`) and
   * applies up to `maxSize` deliveries; all are acked after the one COMMIT. A failing
   * batch is split in halves until the failing delivery is alone, so one poison
   * message cannot stall the rest. Default: off (one transaction per message).
   */
  batch?: { maxSize?: number; maxWaitMs?: number };
  /** Deliveries processed at once (each holds one pool connection). Default 10, 1..1000. */
  concurrency?: number;
  /** Store a sha256 of the payload and detect a key reused with another payload. Default true. */
  payloadHash?: boolean;
  /** What to do on a payload mismatch: `dead-letter` (default) or `ack` (treat as duplicate). */
  onMismatch?: MismatchPolicy;
  /** Attempts before dead-lettering a failing delivery. Default 5, 1..1000. */
  maxAttempts?: number;
  /** Delay before a retry. Default exponential from 1 s to 5 min with full jitter. */
  backoff?: Backoff;
  /** Delay before retrying a delivery whose claim was busy. Default 2000 ms. */
  busyRetryDelayMs?: number;
  /**
   * Refuse a delivery first sent longer ago than the dedup window keeps a claim: after
   * pruning, such a redelivery could not be told from a new message and would be applied
   * again. The floor reads when the broker says the message was first sent
   * (`Delivery.firstSentAt`: SQS `SentTimestamp`, Kafka `LogAppendTime` with
   * kafkajs); a delivery first sent more than `window - marginMs` ago gets the `expired`
   * event and is dead-lettered (`EO_DELIVERY_EXPIRED`), before any claim. Default: on when
   * `retention` is set, for broker timestamps only; `false` turns it off; a delivery
   * without a timestamp is never floored.
   */
  admissionFloor?: boolean | AdmissionFloorOptions;
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
