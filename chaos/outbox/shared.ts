import type pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';

/** One process of the outbox run (node.ts), passed as JSON in CHAOS_WORKER. */
export interface OutboxNodeConfig {
  role: 'a' | 'relay' | 'b';
  index: number;
  databaseUrl: string;
  /** Holds both services' dedup tables, the outbox and the run's tables. */
  schema: string;
  brokers: string[];
  /** Service A consumes it (group `groupA`). */
  inTopic: string;
  groupA: string;
  /** The relays publish to it; service B consumes it (group `groupB`). */
  outTopic: string;
  groupB: string;
  /** The relays' lease: how long a killed relay's claimed rows wait. */
  leaseMs: number;
  /** Negative control (see OutboxControl): break the pipeline on purpose. */
  control?: OutboxControl | undefined;
}

/**
 * Negative controls, to show the checker catches what it claims to: `offset-key`
 * makes service B deduplicate by the record's topic/partition/offset instead of the
 * outbox id, so a relay's re-publish is a second delivery B applies again;
 * `unordered` enqueues without an ordering key, so the relays publish an account's
 * rows concurrently and to any partition. Either run must fail.
 */
export type OutboxControl = 'offset-key' | 'unordered';
export const OUTBOX_CONTROLS: readonly OutboxControl[] = ['offset-key', 'unordered'];

/** An input message: one logical operation on an account. */
export interface Operation {
  op: string;
  account: string;
}

/** What service A sends service B through the outbox: the operation and its place in the account's order. */
export interface Downstream {
  op: string;
  account: string;
  seq: number;
}

/**
 * The run's tables, next to the consumers' dedup tables and the outbox:
 * - `accounts`: service A's sequence counter per account;
 * - `a_effects`: one row per effect service A applied (no unique key, so a double shows);
 * - `b_applied`: one row per effect service B applied; `id` (a serial) is B's apply order.
 */
export function outboxTables(schema: string): {
  accounts: string;
  aEffects: string;
  bApplied: string;
} {
  const s = quoteIdentifier(schema);
  return { accounts: `${s}.accounts`, aEffects: `${s}.a_effects`, bApplied: `${s}.b_applied` };
}

export async function createOutboxChaosSchema(pool: pg.Pool, schema: string): Promise<void> {
  const t = outboxTables(schema);
  await pool.query(`CREATE SCHEMA ${quoteIdentifier(schema)}`);
  await pool.query(`CREATE TABLE ${t.accounts} (account text PRIMARY KEY, seq int NOT NULL)`);
  await pool.query(
    `CREATE TABLE ${t.aEffects} (id bigserial PRIMARY KEY, op text NOT NULL, account text NOT NULL,
       seq int NOT NULL, pid int NOT NULL)`,
  );
  await pool.query(
    `CREATE TABLE ${t.bApplied} (id bigserial PRIMARY KEY, op text NOT NULL, account text NOT NULL,
       seq int NOT NULL, outbox_id text NOT NULL, pid int NOT NULL)`,
  );
}
