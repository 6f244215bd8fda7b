import type { Pool } from 'pg';
import { DatabaseError } from '../errors.js';
import { intOption } from '../option-checks.js';
import { outboxChannel } from './enqueue.js';
import { outboxRef, outboxRelations, type OutboxTableOptions } from './table.js';

/** A row the relay gave up on, as {@link listParked} returns it. */
export interface ParkedRow {
  /** The row's id (its downstream idempotency key). */
  id: string;
  /** The destination it was enqueued for. */
  destination: string;
  /** Its ordering key, or null; later rows of the key wait for it. */
  orderingKey: string | null;
  /** Attempts made. */
  attempts: number;
  /** The error of the last attempt. */
  lastError: string | null;
  /** When it was enqueued (database clock). */
  createdAt: Date;
  /** The payload as text (UTF-8; bytes that are not valid UTF-8 show as U+FFFD). */
  payloadText: string;
  /** The payload's content type. */
  contentType: string;
}

/** Options of {@link listParked}. */
export interface ListParkedOptions extends OutboxTableOptions {
  /** Only rows for this destination. */
  destination?: string;
  /** Most rows returned, oldest first. Default 100, at most 10 000. */
  limit?: number;
}

/**
 * Parked rows, oldest first: rows whose publishing failed `maxAttempts` times, or with
 * an error that cannot succeed later. A parked row holds back the later rows of its
 * ordering key until it is requeued (or deleted by you).
 */
export async function listParked(
  pool: Pool,
  options: ListParkedOptions = {},
): Promise<ParkedRow[]> {
  const limit = intOption('limit', options.limit, 100, 1, 10_000);
  const { table } = outboxRelations(outboxRef(options));
  const result = await pool
    .query<ParkedRow>(
      `SELECT id, destination, ordering_key AS "orderingKey", attempts, last_error AS "lastError",
              created_at AS "createdAt", convert_from(payload, 'UTF8') AS "payloadText",
              content_type AS "contentType"
         FROM ${table}
        WHERE state = 'parked' AND ($1::text IS NULL OR destination = $1)
        ORDER BY seq LIMIT $2`,
      [options.destination ?? null, limit],
    )
    .catch(async (cause: unknown) => {
      // convert_from refuses invalid UTF-8: list those rows with their bytes as hex.
      if ((cause as { code?: string }).code !== '22021')
        throw new DatabaseError('outbox list parked', cause);
      return pool.query<ParkedRow>(
        `SELECT id, destination, ordering_key AS "orderingKey", attempts, last_error AS "lastError",
                created_at AS "createdAt", encode(payload, 'hex') AS "payloadText",
                content_type AS "contentType"
           FROM ${table}
          WHERE state = 'parked' AND ($1::text IS NULL OR destination = $1)
          ORDER BY seq LIMIT $2`,
        [options.destination ?? null, limit],
      );
    });
  return result.rows;
}

/** Which parked rows {@link requeueParked} puts back. */
export interface RequeueOptions extends OutboxTableOptions {
  /** These rows (parked ones only; others are left alone). Default: every parked row. */
  ids?: readonly string[];
  /** Only rows for this destination. */
  destination?: string;
}

/**
 * Puts parked rows back to pending with their attempt count reset, due now, and wakes
 * the relays; returns how many. Their `last_error` stays until they next fail or
 * publish. Requeue once the cause is fixed (a missing queue, a rejected payload).
 */
export async function requeueParked(pool: Pool, options: RequeueOptions = {}): Promise<number> {
  const ref = outboxRef(options);
  const { table } = outboxRelations(ref);
  const result = await pool
    .query(
      `WITH requeued AS (
         UPDATE ${table} SET state = 'pending', attempts = 0, available_at = now()
          WHERE state = 'parked'
            AND ($1::uuid[] IS NULL OR id = ANY($1::uuid[]))
            AND ($2::text IS NULL OR destination = $2)
         RETURNING 1)
       SELECT (SELECT count(*)::int FROM requeued) AS n, pg_notify($3, '')`,
      [
        options.ids === undefined ? null : [...options.ids],
        options.destination ?? null,
        outboxChannel(ref),
      ],
    )
    .catch((cause: unknown) => {
      throw new DatabaseError('outbox requeue', cause);
    });
  return (result.rows[0] as { n: number } | undefined)?.n ?? 0;
}
