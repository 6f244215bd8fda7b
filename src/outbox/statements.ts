import type { Pool } from 'pg';
import { DatabaseError } from '../errors.js';
import type { TableRef } from '../store/identifiers.js';
import { sqlLiteral } from '../store/literals.js';
import type { OutboxRecord } from './record.js';
import { outboxRelations } from './table.js';

/** A claimed batch: its rows and the fencing token every mark must present. */
export interface ClaimedBatch {
  token: string;
  records: OutboxRecord[];
}

/** How a failed row was recorded. */
export interface FailureMark {
  id: string;
  /** Retried later, or parked for good (until requeued). */
  state: 'pending' | 'parked';
}

/** A row to record as failed. */
export interface Failure {
  id: string;
  error: string;
  /** Retry after this long; ignored when the row is parked. */
  delayMs: number;
  /** Park now, whatever the attempt count (the error cannot succeed later). */
  park: boolean;
}

interface ClaimRow {
  id: string;
  destination: string;
  ordering_key: string | null;
  payload: Buffer;
  content_type: string;
  headers: Record<string, string>;
  attempts: number;
  created_at: Date;
  lease_token: string;
}

/**
 * The relay's statements on one outbox table. Each runs on its own (autocommit): no
 * transaction is held while a row is being published; the lease and its token are
 * what keep other relays off the row meanwhile.
 */
export class RelayStatements {
  private readonly claimSql: string;
  private readonly publishedSql: string;
  private readonly failedSql: string;

  constructor(
    private readonly pool: Pool,
    ref: TableRef,
  ) {
    const { table, sequence } = outboxRelations(ref);
    // A row is due when it is for one of this relay's destinations, pending, its backoff
    // has passed, no live lease covers it, and no older row of its destination and
    // ordering key is still unpublished (pending or parked): a key's rows go one at a
    // time, in order, and a stuck row holds back its own destination's key only. Rows of
    // destinations this relay does not publish are never touched: another relay's.
    // One token per claim, from a sequence: it only grows, so a relay whose lease ran
    // out holds a smaller token than whoever claimed the row after it. nextval takes the
    // sequence's name as a string: sqlLiteral's, right whatever standard_conforming_strings.
    this.claimSql = `
      WITH token AS (SELECT nextval(${sqlLiteral(sequence)}::regclass) AS t),
      due AS (
        SELECT o.id FROM ${table} o
         WHERE o.state = 'pending' AND o.available_at <= now()
           AND o.destination = ANY($4::text[])
           AND (o.lease_until IS NULL OR o.lease_until <= now())
           AND (o.ordering_key IS NULL OR NOT EXISTS (
                 SELECT 1 FROM ${table} p
                  WHERE p.ordering_key = o.ordering_key AND p.destination = o.destination
                    AND p.state <> 'published' AND p.seq < o.seq))
         ORDER BY o.seq
         LIMIT $1
         FOR UPDATE OF o SKIP LOCKED)
      UPDATE ${table} t
         SET lease_owner = $2, lease_token = token.t, attempts = t.attempts + 1,
             lease_until = now() + $3::double precision * interval '1 millisecond'
        FROM due, token
       WHERE t.id = due.id
      RETURNING t.id, t.destination, t.ordering_key, t.payload, t.content_type, t.headers,
                t.attempts, t.created_at, t.seq, t.lease_token::text AS lease_token`;
    // The token check is the fence: a row re-claimed by another relay carries a newer
    // token, and the stale relay's mark matches nothing.
    this.publishedSql = `
      UPDATE ${table}
         SET state = 'published', published_at = now(), lease_owner = NULL, lease_until = NULL
       WHERE id = ANY($1::uuid[]) AND lease_token = $2 AND state = 'pending'
      RETURNING id, (extract(epoch FROM now() - created_at) * 1000)::double precision AS age_ms`;
    this.failedSql = `
      UPDATE ${table} t
         SET last_error = f.error, lease_owner = NULL, lease_until = NULL,
             state = CASE WHEN f.park OR t.attempts >= $3 THEN 'parked' ELSE 'pending' END,
             available_at = CASE WHEN f.park OR t.attempts >= $3 THEN t.available_at
                            ELSE now() + f.delay_ms * interval '1 millisecond' END
        FROM unnest($1::uuid[], $4::text[], $5::double precision[], $6::boolean[])
             AS f(id, error, delay_ms, park)
       WHERE t.id = f.id AND t.lease_token = $2 AND t.state = 'pending'
      RETURNING t.id, t.state`;
  }

  /** Claims up to `limit` due rows of `destinations` for `owner` under a lease of `leaseMs`. */
  async claim(
    owner: string,
    destinations: readonly string[],
    limit: number,
    leaseMs: number,
  ): Promise<ClaimedBatch | undefined> {
    const result = await this.pool
      .query<ClaimRow & { seq: string }>(this.claimSql, [limit, owner, leaseMs, destinations])
      .catch((cause: unknown) => {
        throw new DatabaseError('outbox claim', cause);
      });
    if (result.rows.length === 0) return undefined;
    // UPDATE … RETURNING does not keep the CTE's order; publishers see commit order.
    const rows = result.rows.sort((a, b) => (BigInt(a.seq) < BigInt(b.seq) ? -1 : 1));
    return {
      token: rows[0]!.lease_token,
      records: rows.map((row) => ({
        id: row.id,
        destination: row.destination,
        orderingKey: row.ordering_key,
        payload: row.payload,
        contentType: row.content_type,
        headers: row.headers,
        attempts: row.attempts,
        createdAt: row.created_at,
      })),
    };
  }

  /**
   * Marks rows published if this claim still holds them; returns the ids it marked,
   * with each row's age at publication (ms since it was written).
   */
  async markPublished(ids: readonly string[], token: string): Promise<Map<string, number>> {
    if (ids.length === 0) return new Map();
    const result = await this.pool
      .query<{ id: string; age_ms: number }>(this.publishedSql, [ids, token])
      .catch((cause: unknown) => {
        throw new DatabaseError('outbox mark published', cause);
      });
    return new Map(result.rows.map((row) => [row.id, row.age_ms]));
  }

  /** Records failures if this claim still holds the rows; returns what became of each. */
  async markFailed(
    failures: readonly Failure[],
    token: string,
    maxAttempts: number,
  ): Promise<FailureMark[]> {
    if (failures.length === 0) return [];
    const result = await this.pool
      .query<FailureMark>(this.failedSql, [
        failures.map((f) => f.id),
        token,
        maxAttempts,
        failures.map((f) => f.error),
        failures.map((f) => f.delayMs),
        failures.map((f) => f.park),
      ])
      .catch((cause: unknown) => {
        throw new DatabaseError('outbox mark failed', cause);
      });
    return result.rows;
  }
}
