import type { Pool } from 'pg';
import { DatabaseError } from '../errors.js';
import type { TableRef } from './identifiers.js';
import { guardNewClients } from '../tx/acquire.js';
import { cancelBackend } from '../tx/cancel.js';

/** How long a cancel of an abandoned migration waits for the server to take it. */
const CANCEL_TIMEOUT_MS = 5_000;

/** The DDL of one table family for one configured name. */
export interface Ddl {
  /** Idempotent statements (`CREATE ... IF NOT EXISTS`), in the order they run. */
  statements: string[];
  /** Qualified names of every relation the statements create (tables, indexes). */
  relations: string[];
  /** Signatures (`"schema"."name"(text, bytea)`) of the functions they create. */
  functions?: string[];
  /**
   * Columns added to an existing relation after its first version (`ALTER TABLE ... ADD
   * COLUMN IF NOT EXISTS` among the statements): the DDL runs when one is missing.
   */
  columns?: Array<{ relation: string; column: string }>;
}

/** Whether a migration found everything in place or created what was missing. */
export type MigrationResult = 'present' | 'created';

/**
 * A kind of table the library owns (the consumers' dedup table, Kafka stored offsets,
 * ...). Its DDL has one owner, `ddl`, used both to migrate and to print it (the CLI's
 * `migrate --print`), so what a deploy pipeline runs is what the library would run.
 */
export interface TableFamily {
  /** Stable name, as `migrate --only` takes it: `consumer`, `kafka-offsets`. */
  readonly name: string;
  /** What the table holds, for help and output. */
  readonly summary: string;
  /** Table name unless configured otherwise. */
  readonly defaultTable: string;
  /** The statements that create the family's relations under `ref`. */
  ddl(ref: TableRef): Ddl;
  /**
   * Creates what is missing; idempotent and safe when many processes run it at once.
   * `signal` abandons it (see `applyDdl`).
   */
  migrate(pool: Pool, ref: TableRef, signal?: AbortSignal): Promise<MigrationResult>;
}

/**
 * Runs a family's DDL under an advisory lock (concurrent `CREATE ... IF NOT EXISTS` can
 * still collide on the catalog). When every relation and function exists it runs
 * nothing at all: `CREATE INDEX IF NOT EXISTS` takes a table lock even when the index
 * exists, and would queue behind every open claim (a long handler), stalling the claims
 * queued behind it; a worker starting next to a busy fleet must not touch the DDL.
 *
 * The lock is the session's, taken before the transaction starts: a backend reads
 * another's committed catalog changes at transaction start (and when it locks a
 * relation), not when an advisory lock is granted, so a check inside a transaction
 * begun before the wait still saw the relations missing and ran the DDL again.
 *
 * When `signal` aborts (a consumer's stop deadline) the migration is abandoned: the
 * statement running is cancelled with a CancelRequest (a DDL queued for ACCESS EXCLUSIVE
 * behind a long transaction would otherwise stay queued, stalling every claim behind
 * it), no further statement starts, and the transaction rolls back.
 */
export async function applyDdl(
  pool: Pool,
  ddl: Ddl,
  options: { lockKey: number; operation: string; ref: TableRef; signal?: AbortSignal },
): Promise<MigrationResult> {
  guardNewClients(pool);
  const { signal } = options;
  signal?.throwIfAborted();
  const client = await pool.connect().catch((cause: unknown) => {
    throw new DatabaseError(`connect (${options.operation})`, cause);
  });
  const cancel = (): void => {
    // Best effort: a cancel that fails leaves the statement to end on its own.
    cancelBackend(client, pool, CANCEL_TIMEOUT_MS).catch(() => undefined);
  };
  signal?.addEventListener('abort', cancel, { once: true });
  const query = async (text: string, values?: unknown[]): Promise<void> => {
    // Checked before each statement too: a cancel arriving between two is ignored.
    signal?.throwIfAborted();
    await client.query(text, values);
  };
  const ready = async (): Promise<boolean> => {
    const { rows } = await client.query<{ ready: boolean }>(
      `SELECT (SELECT bool_and(to_regclass(r) IS NOT NULL) FROM unnest($1::text[]) AS r)
          AND (SELECT coalesce(bool_and(to_regprocedure(f) IS NOT NULL), true)
                 FROM unnest($2::text[]) AS f)
          AND (SELECT coalesce(bool_and(EXISTS (
                   SELECT 1 FROM pg_attribute a
                    WHERE a.attrelid = to_regclass(c.r) AND a.attname = c.col AND NOT a.attisdropped)), true)
                 FROM unnest($3::text[], $4::text[]) AS c(r, col)) AS ready`,
      [
        ddl.relations,
        ddl.functions ?? [],
        (ddl.columns ?? []).map((c) => c.relation),
        (ddl.columns ?? []).map((c) => c.column),
      ],
    );
    return rows[0]?.ready === true;
  };
  let locked = false;
  let broken: unknown;
  try {
    if (await ready()) return 'present';
    await query('SELECT pg_advisory_lock($1)', [options.lockKey]);
    locked = true;
    await query('BEGIN');
    // Another process may have created them while this one waited for the lock.
    signal?.throwIfAborted();
    const result = (await ready()) ? 'present' : 'created';
    if (result === 'created') for (const statement of ddl.statements) await query(statement);
    await query('COMMIT');
    return result;
  } catch (cause) {
    await client.query('ROLLBACK').catch(() => undefined);
    if (signal?.aborted) throw signal.reason;
    throw new DatabaseError(options.operation, cause, {
      schema: options.ref.schema,
      table: options.ref.table,
    });
  } finally {
    if (locked)
      await client.query('SELECT pg_advisory_unlock($1)', [options.lockKey]).catch((error) => {
        // Not unlocked: the session must end, and the lock with it.
        broken = error;
      });
    signal?.removeEventListener('abort', cancel);
    client.release(broken === undefined ? undefined : toError(broken));
  }
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}
