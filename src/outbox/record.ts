/** One outbox row as a publisher receives it. */
export interface OutboxRecord {
  /** The row's UUIDv7: the message's idempotency key downstream. */
  readonly id: string;
  /** The destination it was enqueued for (the key of the relay's `publishers`). */
  readonly destination: string;
  /** The ordering key, or null. */
  readonly orderingKey: string | null;
  /** The payload bytes as stored (UTF-8 JSON or text, or raw bytes). */
  readonly payload: Buffer;
  /** `application/json`, `text/plain; charset=utf-8`, `application/octet-stream` or the caller's. */
  readonly contentType: string;
  /** The headers given to `enqueue`. */
  readonly headers: Readonly<Record<string, string>>;
  /** This attempt's number, 1-based (counted when the row is claimed). */
  readonly attempts: number;
  /** When the enqueuing transaction wrote it (database clock). */
  readonly createdAt: Date;
}

/**
 * Sends rows to one destination. Resolve when every row was accepted by the broker or
 * server; resolve with a map of id → error for the rows that were not (the others
 * count as published); throw to fail the whole batch. A row is retried with backoff,
 * and parked after `maxAttempts` or at once when its error is an
 * `EffectivelyOnceError` with `retryable: false`.
 *
 * A publisher must carry `record.id` as the downstream idempotency key: the relay is
 * at-least-once (a crash after the send and before the mark sends the row again).
 */
export interface Publisher {
  /**
   * Sends `records` (at most the relay's `batchSize`, never two of one ordering key).
   * `signal` aborts when the relay's `publishTimeoutMs` runs out.
   */
  publish(
    records: readonly OutboxRecord[],
    signal: AbortSignal,
  ): Promise<ReadonlyMap<string, unknown> | undefined | void>;
}

/** The header (Kafka) and message attribute (SQS) that carries the outbox id. */
export const OUTBOX_ID_HEADER = 'eo-outbox-id';
