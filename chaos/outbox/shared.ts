import type pg from 'pg';
import { quoteIdentifier } from '../../src/store/identifiers.js';
import type { WorkerBrokerConfig } from '../consumer/protocol.js';

/** Which publisher the relays use, and so what service B is. */
export type OutboxPublisherName = 'kafka' | 'sqs' | 'http';
export const OUTBOX_PUBLISHERS: readonly OutboxPublisherName[] = ['kafka', 'sqs', 'http'];

/** The broker service A consumes its operations from, per publisher. */
export const INPUT_BROKER: Record<OutboxPublisherName, 'kafka' | 'sqs'> = {
  kafka: 'kafka',
  sqs: 'sqs',
  http: 'sqs',
};

/** Where the relays publish, and service B receives. */
export type OutputConfig =
  | { kind: 'kafka'; brokers: string[]; topic: string; groupId: string }
  | { kind: 'sqs'; endpoint: string; queueUrl: string }
  | { kind: 'http'; ports: number[] };

/** One process of the outbox run (node.ts), passed as JSON in CHAOS_WORKER. */
export interface OutboxNodeConfig {
  role: 'a' | 'relay' | 'b';
  index: number;
  databaseUrl: string;
  /** Holds both services' dedup tables, the outbox and the run's tables. */
  schema: string;
  publisher: OutboxPublisherName;
  /** What service A consumes. */
  input: WorkerBrokerConfig;
  /** What the relays publish to and service B receives from. */
  output: OutputConfig;
  /** The relays' lease: how long a killed relay's claimed rows wait. */
  leaseMs: number;
  /** Longest random pause in A's transaction between its enqueue and its COMMIT. */
  hotDelayMs: number;
  /** Negative control (see OutboxControl): break the pipeline on purpose. */
  control?: OutboxControl | undefined;
}

/**
 * Negative controls, to show the checker catches what it claims to; each run must
 * fail:
 * - `unordered`: no ordering key on the outbox rows, so the relays publish an account's
 *   rows concurrently (and to any partition or group): B applies them out of order;
 * - `enqueue-order`: `enqueue(..., { order: 'enqueue' })`, so A's overlapping
 *   transactions of one account are published in enqueue order, not commit order;
 * - `offset-key` (Kafka): B deduplicates by topic/partition/offset, not the outbox id,
 *   so a relay's re-publish is applied twice;
 * - `no-dedup` (HTTP): B's receiver ignores `Idempotency-Key`, so a re-sent request is
 *   applied twice.
 */
export type OutboxControl = 'unordered' | 'enqueue-order' | 'offset-key' | 'no-dedup';
export const OUTBOX_CONTROLS: Record<OutboxPublisherName, readonly OutboxControl[]> = {
  kafka: ['unordered', 'enqueue-order', 'offset-key'],
  sqs: ['unordered', 'enqueue-order'],
  http: ['unordered', 'enqueue-order', 'no-dedup'],
};

/**
 * The two destination sets on the one outbox table: each account's rows go to one of
 * them, and relay `i` publishes only `DESTINATIONS[i % 2]` (both reach the same output).
 */
export const DESTINATIONS = ['b-even', 'b-odd'] as const;

/** The destination of an account's rows (`acct-<k>`: by k's parity). */
export function destinationOf(account: string): string {
  return DESTINATIONS[Number(account.slice('acct-'.length)) % 2]!;
}

/** An input message: one logical operation on an account; `poison` rows park until fixed. */
export interface Operation {
  op: string;
  account: string;
  poison?: boolean;
}

/** What service A sends service B through the outbox. */
export type Downstream = Operation;

/** The error a relay gives a poison row while the poison gate is closed. */
export const POISON_ERROR = 'poison row: refused until the cause is fixed';

/**
 * The run's tables, next to the consumers' dedup tables and the outbox:
 * - `accounts`: service A's sequence counter per account, taken after the enqueue and
 *   locked until COMMIT, so its values rise in commit order: the truth B's order is
 *   checked against;
 * - `a_effects`: one row per effect service A applied, with that sequence number (no
 *   unique key, so a double shows);
 * - `b_applied`: one row per effect service B applied; `id` (a serial) is B's apply order;
 * - `b_seen`, `b_requests`: the HTTP receiver's dedup keys, and every request it got;
 * - `poison_gate`: one row, `fixed` once the run "fixes" what made poison rows fail;
 *   `poison_refused`: the outbox ids of the poison rows a relay refused (and so parked).
 */
export function outboxTables(schema: string): {
  accounts: string;
  aEffects: string;
  bApplied: string;
  bSeen: string;
  bRequests: string;
  poisonGate: string;
  poisonRefused: string;
} {
  const s = quoteIdentifier(schema);
  return {
    accounts: `${s}.accounts`,
    aEffects: `${s}.a_effects`,
    bApplied: `${s}.b_applied`,
    bSeen: `${s}.b_seen`,
    bRequests: `${s}.b_requests`,
    poisonGate: `${s}.poison_gate`,
    poisonRefused: `${s}.poison_refused`,
  };
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
       outbox_id text NOT NULL, pid int NOT NULL)`,
  );
  await pool.query(`CREATE TABLE ${t.bSeen} (key text PRIMARY KEY)`);
  await pool.query(`CREATE TABLE ${t.bRequests} (key text NOT NULL)`);
  await pool.query(`CREATE TABLE ${t.poisonGate} (fixed boolean NOT NULL)`);
  await pool.query(`INSERT INTO ${t.poisonGate} VALUES (false)`);
  await pool.query(`CREATE TABLE ${t.poisonRefused} (id uuid PRIMARY KEY)`);
}
