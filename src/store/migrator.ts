import { createHash } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { DatabaseError, EffectivelyOnceError, MigrationsPendingError } from '../errors.js';
import { guardClient, guardNewClients } from '../tx/acquire.js';
import { cancelBackend } from '../tx/cancel.js';
import type { Logger } from '../types.js';
import { qualifiedTable, type TableRef } from './identifiers.js';
import {
  ledgerRef,
  ledgerStatements,
  planMigrations,
  readLedgerSql,
  stepScript,
  type AppliedStep,
  type MigrationPlan,
} from './ledger.js';
import { sqlstateOf } from './pg-errors.js';
import type { TableFamily } from './table-family.js';

/** How long a cancel of an abandoned migration waits for the server to take it. */
const CANCEL_TIMEOUT_MS = 5_000;

/**
 * First key of every migration's advisory lock ("efon"): fixed for every version, so
 * migrators of two versions serialise too. The second is the table's (see
 * {@link migrationLockKeys}).
 */
export const MIGRATION_LOCK_CLASS = 0x6566_6f6e;

/**
 * The two keys of the transaction-level advisory lock that serialises the migrations of
 * one family's table: {@link MIGRATION_LOCK_CLASS} and 32 bits of a hash of the family,
 * schema and table. Two configurations of one table take the same lock; two tables
 * rarely do (a collision only serialises them).
 */
export function migrationLockKeys(family: string, ref: TableRef): [number, number] {
  const digest = createHash('sha256').update(`${family}\0${ref.schema}\0${ref.table}`).digest();
  return [MIGRATION_LOCK_CLASS, digest.readInt32BE(0)];
}

/** What {@link applyMigrations} did to one table. */
export interface MigrationOutcome {
  /** Versions this call applied, in order; empty when nothing was pending. */
  applied: number[];
  /** The table's version after it: the highest the ledger records. */
  version: number;
  /** Recorded versions this version does not know (a newer version migrated the table). */
  unknown: number[];
}

type Query = (text: string, values?: unknown[]) => Promise<unknown>;

/**
 * Brings one table of a family up to this version's steps. Idempotent and safe when
 * many processes run it at once (services starting together, a rolling deploy, two
 * configurations sharing a table):
 * - It first reads the ledger without a lock: when every step is applied it runs
 *   nothing else, so an instance starting beside a busy fleet takes no lock (DDL such
 *   as `CREATE INDEX IF NOT EXISTS` takes the table's even when it has nothing to do,
 *   and would queue behind every open claim, stalling the claims behind it).
 * - Otherwise each pending step runs in a transaction of its own, with its ledger row,
 *   under a transaction-level advisory lock on the family and table; the ledger is read
 *   again once the lock is held (in READ COMMITTED, so by a snapshot taken after the
 *   wait), and a step another process applied meanwhile is not run again.
 * - A recorded step whose checksum differs throws `MigrationChecksumError`; versions
 *   recorded beyond this version's steps are accepted (see `MigrationPlan.unknown`).
 *
 * When `signal` aborts (a consumer's stop deadline) the migration is abandoned: the
 * statement running is cancelled with a CancelRequest (DDL queued for a table lock
 * behind a long transaction would otherwise stay queued, stalling every claim behind
 * it), no further statement starts, and the step's transaction rolls back.
 */
export async function applyMigrations(
  pool: Pool,
  family: TableFamily,
  ref: TableRef,
  signal?: AbortSignal,
): Promise<MigrationOutcome> {
  family.steps(ref); // validates the names before anything connects
  guardNewClients(pool);
  signal?.throwIfAborted();
  const client = await pool.connect().then(guardClient, (cause: unknown) => {
    throw new DatabaseError('connect (migrate)', cause);
  });
  const cancel = (): void => {
    // Best effort: a cancel that fails leaves the statement to end on its own.
    cancelBackend(client, pool, CANCEL_TIMEOUT_MS).catch(() => undefined);
  };
  signal?.addEventListener('abort', cancel, { once: true });
  const query: Query = async (text, values) => {
    // Checked before each statement too: a cancel arriving between two is ignored.
    signal?.throwIfAborted();
    return client.query(text, values);
  };
  const applied: number[] = [];
  try {
    let plan = planMigrations(family, ref, await readLedger(client, family, ref));
    if (plan.pending.length > 0) await ensureLedger(query, client, ref.schema);
    while (plan.pending.length > 0) {
      await query('BEGIN ISOLATION LEVEL READ COMMITTED');
      await query('SELECT pg_advisory_xact_lock($1, $2)', migrationLockKeys(family.name, ref));
      plan = planMigrations(family, ref, await readLedger(client, family, ref));
      const step = plan.pending[0];
      if (step !== undefined) {
        for (const statement of stepScript(family, ref, step)) await query(statement);
        applied.push(step.version);
        plan = { ...plan, pending: plan.pending.slice(1) };
      }
      await query('COMMIT');
    }
    return {
      applied,
      version: Math.max(plan.version, ...applied),
      unknown: plan.unknown,
    };
  } catch (cause) {
    await client.query('ROLLBACK').catch(() => undefined);
    if (signal?.aborted) throw signal.reason;
    if (cause instanceof EffectivelyOnceError) throw cause;
    throw new DatabaseError('migrate', cause, {
      family: family.name,
      schema: ref.schema,
      table: ref.table,
      applied,
    });
  } finally {
    signal?.removeEventListener('abort', cancel);
    // Abandoned: the CancelRequest sent on its own socket may still reach the backend
    // after the statement ended, and would cancel whatever the pool ran on it next.
    client.release(signal?.aborted === true ? new Error('migration abandoned') : undefined);
  }
}

/**
 * Where one table of a family stands, read from the ledger without a lock and without
 * changing anything (the `migrate: false` check, `migrate --print`).
 */
export async function readPlan(
  pool: Pick<Pool, 'query'>,
  family: TableFamily,
  ref: TableRef,
): Promise<MigrationPlan> {
  family.steps(ref); // validates the names before anything is sent
  let applied: AppliedStep[];
  try {
    applied = await readLedger(pool, family, ref);
  } catch (cause) {
    throw new DatabaseError('read migration ledger', cause, {
      family: family.name,
      schema: ref.schema,
      table: ref.table,
    });
  }
  return planMigrations(family, ref, applied);
}

/**
 * What a door started with `migrate: false` checks: every step of this version is
 * applied to its table, with the checksums this version has. Throws
 * `MigrationsPendingError` (or `MigrationChecksumError`) otherwise.
 */
export async function requireMigrated(
  pool: Pick<Pool, 'query'>,
  family: TableFamily,
  ref: TableRef,
): Promise<void> {
  const plan = await readPlan(pool, family, ref);
  if (plan.pending.length > 0)
    throw new MigrationsPendingError({
      family: family.name,
      schema: ref.schema,
      table: ref.table,
      pending: plan.pending.map((s) => s.version),
    });
}

/**
 * A door's start with `migrate: false`: refuses (throws {@link requireMigrated}'s
 * errors) when the database answers that the table is behind or was migrated from other
 * statements. A database that gives no answer within `timeoutMs` (unreachable, or the
 * connection failed) is not a refusal: the door starts and waits for it, as it does for
 * every outage, and the check is logged as skipped.
 */
export async function checkMigratedAtStart(
  pool: Pick<Pool, 'query'>,
  family: TableFamily,
  ref: TableRef,
  options: { timeoutMs: number; logger: Logger },
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timed-out'>((resolve) => {
    timer = setTimeout(() => resolve('timed-out'), options.timeoutMs);
  });
  const check = requireMigrated(pool, family, ref).then(
    () => 'checked' as const,
    (error: unknown) => {
      if (error instanceof DatabaseError && sqlstateOf(error.cause) === undefined) return error;
      throw error;
    },
  );
  try {
    const outcome = await Promise.race([check, timedOut]);
    if (outcome === 'checked') return;
    options.logger.warn(
      {
        family: family.name,
        schema: ref.schema,
        table: ref.table,
        ...(outcome === 'timed-out' ? {} : { err: outcome }),
      },
      'effectively-once: migrate is false and the migration ledger could not be read; starting unchecked',
    );
    // A check still waiting for a connection must not surface later as unhandled.
    check.catch(() => undefined);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The ledger's rows of one table: none when there is no ledger yet, and none when the
 * table itself is gone (dropped by hand: its recorded steps describe a table that no
 * longer exists, and step 1 must make it again). The ledger is read first: locking it
 * makes the backend take in the catalog changes committed meanwhile, so the table's
 * look-up after it is current even in a transaction that began before a lock wait.
 */
async function readLedger(
  db: Pick<Pool, 'query'>,
  family: TableFamily,
  ref: TableRef,
): Promise<AppliedStep[]> {
  const { rows } = await db.query<{ present: boolean }>(
    'SELECT to_regclass($1) IS NOT NULL AS present',
    [qualifiedTable(ledgerRef(ref.schema))],
  );
  if (rows[0]?.present !== true) return [];
  const ledger = await db.query<AppliedStep>(readLedgerSql(ref.schema), [family.name, ref.table]);
  if (ledger.rows.length === 0) return [];
  const table = await db.query<{ present: boolean }>(
    'SELECT to_regclass($1) IS NOT NULL AS present',
    [qualifiedTable(ref)],
  );
  return table.rows[0]?.present === true ? ledger.rows : [];
}

/** SQLSTATEs of a CREATE that lost a race whose winner committed while it waited. */
const CREATE_RACE = new Set(['23505', '42P06', '42P07', '42710']);

/**
 * Creates the schema's ledger (and the schema) when missing, in a transaction of its
 * own under an advisory lock on the schema's ledger. A transaction sees the catalog as
 * it was when it began, not when its advisory lock was granted, so a `CREATE ... IF NOT
 * EXISTS` after the wait can still miss what the holder created and fail on the
 * catalog's unique index: it is tried once more, in a new transaction that sees it.
 */
async function ensureLedger(query: Query, client: PoolClient, schema: string): Promise<void> {
  const keys = migrationLockKeys('', ledgerRef(schema));
  for (let attempt = 1; ; attempt++) {
    const { rows } = await client.query<{ schema: boolean; ledger: boolean }>(
      'SELECT to_regnamespace($1) IS NOT NULL AS schema, to_regclass($2) IS NOT NULL AS ledger',
      [quoteForRegnamespace(schema), qualifiedTable(ledgerRef(schema))],
    );
    if (rows[0]?.ledger === true) return;
    try {
      await query('BEGIN ISOLATION LEVEL READ COMMITTED');
      await query('SELECT pg_advisory_xact_lock($1, $2)', keys);
      // Only when missing: CREATE SCHEMA checks the right to create schemas first, even
      // when it exists.
      for (const statement of ledgerStatements(schema, rows[0]?.schema === true))
        await query(statement);
      await query('COMMIT');
      return;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      if (attempt > 1 || !CREATE_RACE.has(sqlstateOf(error) ?? '')) throw error;
    }
  }
}

/** `to_regnamespace` parses its argument as an identifier: quoted, any name round-trips. */
function quoteForRegnamespace(schema: string): string {
  return `"${schema.replace(/"/g, '""')}"`;
}
