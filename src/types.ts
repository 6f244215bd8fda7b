import type { ReplicaReport, ReplicaStatus } from './replica/poller.js';
import type { PoolClient } from 'pg';
import type { SqlRunner } from './data-layer.js';
import type { EffectivelyOnceError } from './errors.js';

/**
 * One delivery of a message, as a source adapter hands it to the runner. The runner
 * owns the transaction; the adapter owns the broker. `ack` is called only after the
 * claim and the handler's effect committed (or the key proved to be a duplicate).
 */
export interface Delivery<T = unknown> {
  /** Dedup key. `undefined` or empty means the adapter could not find one: dead-lettered. */
  readonly key: string | undefined;
  /** Decoded body handed to the handler. Meaningless when `rejection` is set. */
  readonly body: T;
  /** Bytes (or text) hashed to detect a key reused with a different payload. */
  readonly payload: string | Uint8Array | undefined;
  /** The broker's own record (SQS `Message`, kafkajs message + topic/partition...). */
  readonly raw: unknown;
  /** 1 on the first delivery; SQS `ApproximateReceiveCount`, tracked in memory for Kafka. */
  readonly attempt: number;
  /** Deliveries with the same ordering key never run at the same time (FIFO group, Kafka key). */
  readonly orderingKey?: string | undefined;
  /** Aborts when the adapter loses the delivery (visibility lapsed, partition revoked). */
  readonly signal?: AbortSignal | undefined;
  /** Set by the adapter when the delivery can never be handled (undecodable body). */
  readonly rejection?: EffectivelyOnceError | undefined;
  /**
   * When the message was first sent, as the broker recorded it (SQS `SentTimestamp`, the
   * Kafka record timestamp); the same on every redelivery. The consumer's admission floor
   * (its `admissionFloor` option) refuses a delivery first sent longer ago than
   * its dedup window keeps a claim (the `expired` event, then a dead letter). A delivery
   * without it is never floored.
   */
  readonly firstSentAt?: Date | undefined;
  /**
   * Who set {@link Delivery.firstSentAt}: `broker` (SQS `SentTimestamp`, Kafka `LogAppendTime`),
   * floored by default; `producer` (Kafka `CreateTime`: any producer's clock, or a
   * timestamp it chose), floored only with `admissionFloor: { producerTimestamps: true }`.
   * Default `broker`.
   */
  readonly firstSentBy?: 'broker' | 'producer' | undefined;
  /**
   * When the handler must have returned, in ms since the epoch (`Date.now()`'s clock): a
   * source whose process has a hard end (AWS Lambda's invocation deadline) sets it, less
   * a margin for the COMMIT and the answer. Past it the delivery is not started (released,
   * no claim); a handler still running at it is timed out (`EO_HANDLER_TIMEOUT`) and rolled
   * back, as at `handlerTimeoutMs`. Undefined: only `handlerTimeoutMs` bounds it.
   */
  readonly workDeadline?: number | undefined;
  /** The processing finished for good (committed or duplicate): delete / commit the offset. */
  ack(): Promise<void>;
  /**
   * Hand the delivery back to the broker to be delivered again after `delayMs`.
   * `attemptSpent` is false when the failure was not the message's (busy claim,
   * database outage, unknown COMMIT): a source that counts attempts itself (Kafka)
   * does not count it.
   */
  retry(delayMs: number, reason: EffectivelyOnceError, attemptSpent?: boolean): Promise<void>;
  /** Park the delivery where a human will look (DLQ, dead-letter topic), then consider it done. */
  deadLetter(reason: EffectivelyOnceError): Promise<void>;
  /** Return an untouched delivery at shutdown without spending an attempt (visibility 0). */
  release(): Promise<void>;
  /**
   * Optional adapter hook run inside the claim's transaction after the handler
   * succeeded, right before COMMIT (e.g. Kafka's `offsets: 'postgres'` stores the next
   * offset here so it commits atomically with the effect). A throw rolls everything back.
   * `together` lists the deliveries that commit in this transaction, this one included
   * (several in batch mode), in order; each one's hook runs, one after the other.
   */
  inTransaction?(tx: SqlRunner, together: ReadonlyArray<Delivery<unknown>>): Promise<void>;
  /**
   * Optional: where the delivery comes from, for telemetry (the OpenTelemetry messaging
   * attributes and the producer's trace context). Called only when telemetry is on.
   */
  messaging?(): MessagingInfo;
}

/**
 * Where a delivery comes from, in the terms of the OpenTelemetry messaging semantic
 * conventions; adapters describe their deliveries with it ({@link Delivery.messaging}).
 */
export interface MessagingInfo {
  /** `messaging.system`: `aws_sqs`, `kafka`, ... */
  readonly system: string;
  /** `messaging.destination.name`: the queue's name, the topic. */
  readonly destination: string;
  /** `messaging.message.id`: the broker's id of the message (SQS `MessageId`). */
  readonly messageId?: string | undefined;
  /** `messaging.consumer.group.name`: the Kafka consumer group. */
  readonly consumerGroup?: string | undefined;
  /** `messaging.destination.partition.id`: the Kafka partition. */
  readonly partition?: number | undefined;
  /** `messaging.kafka.offset`: the record's offset, as a decimal string. */
  readonly offset?: string | undefined;
  /** Records after this one in its partition when it was fetched (Kafka high watermark - offset - 1). */
  readonly lag?: number | undefined;
  /**
   * The producer's message headers or attributes as text: where `traceparent`,
   * `tracestate` and `baggage` are looked up.
   */
  readonly carrier: Readonly<Record<string, string>>;
}

/** How the runner settled one delivery. */
export type DeliveryOutcome =
  'processed' | 'duplicate' | 'retry' | 'dead-lettered' | 'released' | 'unsettled';

/** What the runner offers a source adapter. */
export interface SourceContext<T = unknown> {
  /** Aborts when `stop()` begins: stop receiving, but let `deliver` promises settle. */
  readonly signal: AbortSignal;
  /**
   * Aborts at `stop()`'s deadline (its hard stop): pass it to the broker calls that
   * settle a delivery (ack, retry, release, dead letter) so one the broker never answers
   * is cancelled. The consumer stops waiting for a settlement still running then and
   * reports that delivery `unsettled`: it is redelivered (a committed one as a duplicate).
   */
  readonly hardStop: AbortSignal;
  /** Logger given to `createConsumer`. */
  readonly logger: Logger;
  /**
   * Runs one delivery through claim → handler → commit → ack. Resolves once the
   * delivery is settled (acked, retried, dead-lettered or released); never rejects.
   */
  deliver(delivery: Delivery<T>): Promise<DeliveryOutcome>;
  /** How many more deliveries the runner can accept right now without queueing. */
  freeCapacity(): number;
  /** Resolves when `freeCapacity()` is above zero, or when `signal` aborts. */
  waitForCapacity(): Promise<void>;
  /** Reports a broker-side failure (receive, delete, commit) as the consumer's `error` event. */
  reportError(error: EffectivelyOnceError): void;
}

/**
 * A broker adapter. `run` receives until `ctx.signal` aborts, then resolves once it
 * will deliver nothing more; `close` flushes pending acks and releases resources.
 */
export interface Source<T = unknown> {
  /** Short description for logs, e.g. `sqs:https://…/orders`. */
  readonly description: string;
  /**
   * Receives until `ctx.signal` aborts, handing each message to `ctx.deliver`; resolves once
   * it will deliver nothing more.
   */
  run(ctx: SourceContext<T>): Promise<void>;
  /**
   * Flushes pending acks and releases the broker resources the source created. Called once,
   * after `run` resolved. `signal` aborts at the stop deadline: from then on acknowledge
   * nothing more and stop waiting for the broker (its disconnect may go on in the
   * background); the consumer stops waiting for `close` then too.
   */
  close(options?: { readonly signal?: AbortSignal }): Promise<void>;
}

/**
 * What the handler receives besides the message. `Tx`: what `ctx.tx` is, a pg client
 * by default, the data layer's own transaction object with the consumer's `dataLayer`.
 */
export interface HandlerContext<T = unknown, Tx = PoolClient> {
  /**
   * The open transaction that also holds the claim. With a `dataLayer`: the layer's
   * own transaction object (Prisma's transaction client, a Knex `Transaction`…); write
   * through it as the layer's docs show, and leave ending it to the library (the layer
   * commits once the handler returned and the library's last statement proved the
   * transaction is still the claim's). Without one: a pg client. The runner
   * commits it: statements that would end it (BEGIN, COMMIT, ROLLBACK, END, ABORT,
   * PREPARE TRANSACTION) and `release()` are refused with a `TransactionControlError`.
   * To recover from a statement you expect to fail, wrap it in a SAVEPOINT and
   * `ROLLBACK TO SAVEPOINT`: a failed statement caught any other way aborts the
   * transaction, and the delivery then fails with `EO_TX_ABORTED`.
   */
  readonly tx: Tx;
  /** Aborts on shutdown (after the grace period), on handler timeout, or when the delivery is lost. */
  readonly signal: AbortSignal;
  /** 1-based attempt number. */
  readonly attempt: number;
  /** The dedup key claimed for this delivery. */
  readonly key: string;
  /** The delivery itself, including the broker's raw record. */
  readonly delivery: Delivery<T>;
}

/** The user's handler: do the effect through `ctx.tx`; throw to retry. */
export type Handler<T, Tx = PoolClient> = (message: T, ctx: HandlerContext<T, Tx>) => Promise<void>;

/** One message of a batch handed to a {@link BatchHandler}. */
export interface BatchItem<T = unknown> {
  /** The decoded message. */
  readonly message: T;
  /** The dedup key claimed for it in this batch's transaction. */
  readonly key: string;
  /** 1-based attempt number of its delivery. */
  readonly attempt: number;
  /** The delivery itself, including the broker's raw record. */
  readonly delivery: Delivery<T>;
}

/** What a batch handler receives besides the messages. `Tx`: as {@link HandlerContext}'s. */
export interface BatchContext<Tx = PoolClient> {
  /** The open transaction that holds every claim of the batch (as {@link HandlerContext.tx}). */
  readonly tx: Tx;
  /** Aborts on shutdown (after the grace period) or on handler timeout. */
  readonly signal: AbortSignal;
}

/** Batch mode's effect: apply all `items` through `ctx.tx`; throw to roll the batch back. */
export type BatchHandler<T, Tx = PoolClient> = (
  items: ReadonlyArray<BatchItem<T>>,
  ctx: BatchContext<Tx>,
) => Promise<void>;

/** A pino-compatible logger (pino, bunyan-style `(obj, msg)` and console-like loggers fit). */
export interface Logger {
  /** Per-delivery detail (a refused offset commit during a rebalance, ...). */
  debug(obj: object, msg?: string): void;
  /** Start and stop. */
  info(obj: object, msg?: string): void;
  /** Trouble the consumer works around (database unavailable, a lost connection). */
  warn(obj: object, msg?: string): void;
  /** Failures nobody listened for (an `error` event without a listener). */
  error(obj: object, msg?: string): void;
}

/** What to do when a key arrives again with a different payload hash. */
export type MismatchPolicy = 'dead-letter' | 'ack';

/** Exponential backoff with full jitter, or a function of the attempt that just failed. */
export type Backoff =
  | { initialMs?: number; maxMs?: number; factor?: number; jitter?: boolean }
  | ((attempt: number) => number);

/** Counters returned by `consumer.stats()`; monotonic except `inFlight`. */
export interface ConsumerStats {
  /** Deliveries handed to the consumer by its source. */
  received: number;
  /** Effects committed (the `processed` event). */
  processed: number;
  /** Deliveries whose key was committed before, acked without running the handler. */
  duplicates: number;
  /**
   * Failed attempts (the `failed` event): retried, dead-lettered, or released when the
   * delivery was lost.
   */
  failed: number;
  /** Deliveries handed back to the broker for another attempt. */
  retried: number;
  /** Deliveries parked in a dead-letter queue or topic. */
  deadLettered: number;
  /** Keys that came back with another payload (the `mismatch` event). */
  mismatches: number;
  /**
   * Deliveries the admission floor refused as first sent longer ago than the dedup window
   * keeps a claim (the `expired` event), then dead-lettered.
   */
  expired: number;
  /**
   * Claims that waited past `lockTimeoutMs` for a concurrent delivery of the key
   * (`EO_CLAIM_BUSY`).
   */
  busy: number;
  /**
   * Deliveries handed back without an attempt spent: at shutdown, behind a retried one of
   * their ordering key, or lost to another consumer.
   */
  released: number;
  /**
   * Acks (SQS deletes, Kafka offset commits) that failed after COMMIT; their redelivery is a
   * duplicate.
   */
  ackFailures: number;
  /** Transactions run again in place after a serialization failure or deadlock (40001, 40P01). */
  serializationRetries: number;
  /** Dedup rows deleted by the background `retention` pruner. */
  pruned: number;
  /** Deliveries in the consumer right now (claimed, running or waiting for a slot or their ack). */
  inFlight: number;
  /** With `replicaSafe`: the watched standby as last polled (not a counter). */
  replica?: ReplicaStatus;
}

/** Payloads of the consumer's events. */
export interface ConsumerEvents {
  /** `replicaSafe`: the watched standby's state changed (see `ReplicaReport`). */
  replica: ReplicaReport;
  /**
   * The effect committed (fired before the ack); `durationMs` is the handler's and COMMIT's
   * time.
   */
  processed: { key: string; attempt: number; durationMs: number };
  /** The key was committed before: this delivery is acked without running the handler. */
  duplicate: { key: string; attempt: number };
  /** An attempt failed; `willRetry: false` means the delivery is being dead-lettered. */
  failed: { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };
  /** The key came back with another payload; hashes are hex sha256. */
  mismatch: { key: string; storedHash: string; payloadHash: string };
  /**
   * The admission floor refused the delivery before its claim: it was first sent `ageMs`
   * ago, longer than the dedup window keeps a claim (`lifetimeMs`: the window minus the
   * margin). It is dead-lettered with an `EO_DELIVERY_EXPIRED` reason, never applied.
   */
  expired: { key: string; attempt: number; firstSentAt: Date; ageMs: number; lifetimeMs: number };
  /** The delivery was parked for a human (dead-letter queue or topic). */
  'dead-lettered': { key: string | undefined; attempt: number; error: EffectivelyOnceError };
  /** A background `retention` run deleted rows (runs that deleted none stay quiet). */
  pruned: { deleted: number; durationMs: number };
  /**
   * Broker or database trouble outside a handler (receive, ack, heartbeat, prune, a failed
   * receive loop).
   */
  error: EffectivelyOnceError;
}

/** Name of a consumer event. */
export type ConsumerEventName = keyof ConsumerEvents;
