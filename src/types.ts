import type { PoolClient } from 'pg';
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
   */
  inTransaction?(tx: PoolClient): Promise<void>;
}

/** How the runner settled one delivery. */
export type DeliveryOutcome =
  'processed' | 'duplicate' | 'retry' | 'dead-lettered' | 'released' | 'unsettled';

/** What the runner offers a source adapter. */
export interface SourceContext<T = unknown> {
  /** Aborts when `stop()` begins: stop receiving, but let `deliver` promises settle. */
  readonly signal: AbortSignal;
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
  run(ctx: SourceContext<T>): Promise<void>;
  close(): Promise<void>;
}

/** What the handler receives besides the message. */
export interface HandlerContext<T = unknown> {
  /**
   * A pg client inside the open transaction that also holds the claim. The runner
   * commits it: statements that would end it (BEGIN, COMMIT, ROLLBACK, END, ABORT,
   * PREPARE TRANSACTION) and `release()` are refused with a `TransactionControlError`.
   * To recover from a statement you expect to fail, wrap it in a SAVEPOINT and
   * `ROLLBACK TO SAVEPOINT`: a failed statement caught any other way aborts the
   * transaction, and the delivery then fails with `EO_TX_ABORTED`.
   */
  readonly tx: PoolClient;
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
export type Handler<T> = (message: T, ctx: HandlerContext<T>) => Promise<void>;

/** One message of a batch handed to a {@link BatchHandler}. */
export interface BatchItem<T = unknown> {
  readonly message: T;
  readonly key: string;
  readonly attempt: number;
  readonly delivery: Delivery<T>;
}

/** What a batch handler receives besides the messages. */
export interface BatchContext {
  /** A pg client inside the open transaction that holds every claim of the batch (guarded as {@link HandlerContext.tx}). */
  readonly tx: PoolClient;
  /** Aborts on shutdown (after the grace period) or on handler timeout. */
  readonly signal: AbortSignal;
}

/** Batch mode's effect: apply all `items` through `ctx.tx`; throw to roll the batch back. */
export type BatchHandler<T> = (
  items: ReadonlyArray<BatchItem<T>>,
  ctx: BatchContext,
) => Promise<void>;

/** A pino-compatible logger (pino, bunyan-style `(obj, msg)` and console-like loggers fit). */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
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
  received: number;
  processed: number;
  duplicates: number;
  failed: number;
  retried: number;
  deadLettered: number;
  mismatches: number;
  busy: number;
  released: number;
  ackFailures: number;
  /** Transactions run again in place after a serialization failure or deadlock (40001, 40P01). */
  serializationRetries: number;
  /** Dedup rows deleted by the background `retention` pruner. */
  pruned: number;
  inFlight: number;
}

/** Payloads of the consumer's events. */
export interface ConsumerEvents {
  processed: { key: string; attempt: number; durationMs: number };
  duplicate: { key: string; attempt: number };
  failed: { key: string; attempt: number; error: EffectivelyOnceError; willRetry: boolean };
  mismatch: { key: string; storedHash: string; payloadHash: string };
  'dead-lettered': { key: string | undefined; attempt: number; error: EffectivelyOnceError };
  /** A background `retention` run deleted rows (runs that deleted none stay quiet). */
  pruned: { deleted: number; durationMs: number };
  error: EffectivelyOnceError;
}

/** Name of a consumer event. */
export type ConsumerEventName = keyof ConsumerEvents;
