import type { Pool } from 'pg';
import { DatabaseError } from '../errors.js';
import { outboxRef, outboxRelations, type OutboxTableOptions } from './table.js';

/** One destination's share of {@link OutboxStats}. */
export interface DestinationStats {
  /** The destination (a key of some relay's `publishers`, or of none). */
  destination: string;
  /** Its rows not yet published (due, backing off, or waiting for a relay that serves it). */
  pending: number;
  /** Its rows given up on, waiting for a requeue. */
  parked: number;
  /** Age in ms of its oldest pending row (database clock). 0 when none. */
  oldestPendingAgeMs: number;
}

/** Counts of an outbox table, and its lag. */
export interface OutboxStats {
  /** Rows not yet published (due or backing off). */
  pending: number;
  /** Rows given up on, waiting for a requeue. */
  parked: number;
  /** Age in ms of the oldest pending row (database clock): the relay's lag. 0 when none. */
  oldestPendingAgeMs: number;
  /**
   * The same, per destination with rows pending or parked, by name. A destination that
   * no running relay publishes shows here, its pending rows ageing.
   */
  byDestination: DestinationStats[];
}

/** Options of {@link outboxStats}. */
export interface OutboxStatsOptions extends OutboxTableOptions {
  /** Only rows for this destination (say, to wait for it to drain). */
  destination?: string;
}

/** Pending and parked counts and the age of the oldest pending row, in all and per destination. */
export async function outboxStats(
  pool: Pool,
  options: OutboxStatsOptions = {},
): Promise<OutboxStats> {
  const { table } = outboxRelations(outboxRef(options));
  const result = await pool
    .query<{ destination: string; pending: number; parked: number; age: number | null }>(
      `SELECT destination,
              count(*) FILTER (WHERE state = 'pending')::int AS pending,
              count(*) FILTER (WHERE state = 'parked')::int AS parked,
              (extract(epoch FROM now() - min(created_at) FILTER (WHERE state = 'pending')) * 1000)::double precision AS age
         FROM ${table}
        WHERE state <> 'published' AND ($1::text IS NULL OR destination = $1)
        GROUP BY destination ORDER BY destination`,
      [options.destination ?? null],
    )
    .catch((cause: unknown) => {
      throw new DatabaseError('outbox stats', cause);
    });
  const byDestination = result.rows.map((row) => ({
    destination: row.destination,
    pending: row.pending,
    parked: row.parked,
    oldestPendingAgeMs: Math.max(0, row.age ?? 0),
  }));
  return {
    pending: byDestination.reduce((sum, d) => sum + d.pending, 0),
    parked: byDestination.reduce((sum, d) => sum + d.parked, 0),
    oldestPendingAgeMs: byDestination.reduce((max, d) => Math.max(max, d.oldestPendingAgeMs), 0),
    byDestination,
  };
}
