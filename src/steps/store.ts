/**
 * The flows table's statements. Every write of an owner (a step's result, the answer,
 * a lease) names the owner's fence and the count of steps it knows, so a stale owner
 * (fenced by a takeover) or one that lost its place writes nothing.
 */
import type { Pool, PoolClient } from 'pg';
import { CommitUnknownError } from '../errors.js';
import { qualifiedTable, type TableRef } from '../store/identifiers.js';
import { acquireClient } from '../tx/acquire.js';
import { settledStatus } from '../tx/xact-status.js';
import { FlowFencedError, StepFailedError } from './errors.js';
import type { FlowAnswer } from './types.js';

/** One recorded step: its name, kind, and its result's JSON text (null: undefined). */
export interface StepEntry {
  name: string;
  kind: 'step' | 'call';
  result: string | null;
}

/** A flow's row as read. */
export interface FlowRow {
  flow: string;
  version: string | null;
  origin: string;
  fingerprint: Buffer;
  /** The recorded input's JSON text, null for none. */
  input: string | null;
  steps: StepEntry[];
  fence: number;
  /** Whether an owner's lease is still running, and for how long. */
  live: boolean;
  remainingMs: number;
  answer: FlowAnswer | undefined;
}

/** What identifies a claim of a key. */
export interface FlowIdentity {
  scope: string;
  key: string;
  flow: string;
  version: string | undefined;
  origin: string;
  fingerprint: Buffer;
}

/** An owner's position: its fence and how many steps the row holds as it knows it. */
export interface OwnerMark {
  scope: string;
  key: string;
  fence: number;
  flow: string;
}

const ROW_COLUMNS = `flow, version, origin, fingerprint, input::text AS input, steps, fence::text AS fence,
  coalesce(lease_until > now(), false) AS live,
  greatest(0, coalesce(extract(epoch FROM lease_until - now()) * 1000, 0))::float8 AS remaining_ms,
  status, headers, body::text AS body`;

/** A row as ROW_COLUMNS reads it: {@link FlowRow}'s columns, the rest still raw. */
type RawRow = Pick<
  FlowRow,
  'flow' | 'version' | 'origin' | 'fingerprint' | 'input' | 'steps' | 'live'
> & {
  fence: string;
  remaining_ms: number;
  status: number | null;
  headers: Record<string, string> | null;
  body: string | null;
};

/** The flows table's statements, on one pool. */
export class FlowStore {
  private readonly table: string;

  constructor(
    private readonly pool: Pool,
    /** The flows table: part of every derived key (two tables are two services). */
    readonly ref: TableRef,
    private readonly leaseMs: number,
    private readonly acquireTimeoutMs: number,
  ) {
    this.table = qualifiedTable(ref);
  }

  /** Inserts the key's row, owned with fence 1 and the input recorded; false when it exists. */
  async insert(id: FlowIdentity, input: string | null): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `INSERT INTO ${this.table} (scope, flow_key, flow, version, origin, fingerprint, input, lease_until)
       VALUES ($1, $2, $3, $4, $5, $6, $7::json, now() + $8 * interval '1 millisecond')
       ON CONFLICT DO NOTHING`,
      [
        id.scope,
        id.key,
        id.flow,
        id.version ?? null,
        id.origin,
        id.fingerprint,
        input,
        this.leaseMs,
      ],
    );
    return rowCount === 1;
  }

  /** The key's row, or undefined when there is none (never claimed, or pruned). */
  async read(scope: string, key: string): Promise<FlowRow | undefined> {
    const { rows } = await this.pool.query<RawRow>(
      `SELECT ${ROW_COLUMNS} FROM ${this.table} WHERE scope = $1 AND flow_key = $2`,
      [scope, key],
    );
    return rows[0] === undefined ? undefined : rowOf(rows[0]);
  }

  /**
   * Takes the key over when it is unfinished, its lease expired, and it is this
   * identity's: fence + 1, a new lease. The row as taken, or undefined (someone else
   * took it, it finished, or it is not this request's: read it to learn which).
   */
  async takeOver(id: FlowIdentity): Promise<FlowRow | undefined> {
    const { rows } = await this.pool.query<RawRow>(
      `UPDATE ${this.table}
       SET fence = fence + 1, lease_until = now() + $6 * interval '1 millisecond', updated_at = now()
       WHERE scope = $1 AND flow_key = $2 AND status IS NULL
         AND (lease_until IS NULL OR lease_until <= now())
         AND flow = $3 AND origin = $4 AND fingerprint = $5
       RETURNING ${ROW_COLUMNS}`,
      [id.scope, id.key, id.flow, id.origin, id.fingerprint, this.leaseMs],
    );
    return rows[0] === undefined ? undefined : rowOf(rows[0]);
  }

  /**
   * Extends the owner's lease if it still owns the key at `position` steps: false when
   * it was fenced (a takeover) or the row moved on without it.
   */
  async extend(owner: OwnerMark, position: number): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `UPDATE ${this.table} SET lease_until = now() + $5 * interval '1 millisecond'
       WHERE scope = $1 AND flow_key = $2 AND fence = $3 AND status IS NULL
         AND jsonb_array_length(steps) = $4`,
      [owner.scope, owner.key, owner.fence, position, this.leaseMs],
    );
    return rowCount === 1;
  }

  /**
   * Ends the owner's lease now (a transient failure): a retry may take over at once.
   * Records why (`last_error`), for an operator's `inspect`.
   */
  async release(
    owner: OwnerMark,
    why: { code: string; message: string; step?: string },
  ): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.table}
       SET lease_until = now(),
           last_error = jsonb_build_object('code', $4::text, 'message', $5::text, 'step', $6::text,
             'fence', $3::bigint, 'at', now())
       WHERE scope = $1 AND flow_key = $2 AND fence = $3 AND status IS NULL`,
      [owner.scope, owner.key, owner.fence, why.code, why.message.slice(0, 2000), why.step ?? null],
    );
  }

  /**
   * Records step `position` in one transaction: `work(client)` (a database step's
   * writes, whose value is recorded) then the entry, fenced; a fenced owner's
   * transaction rolls back (FlowFencedError). COMMIT's outcome is read back by the
   * transaction's id when the connection dies on it, never assumed.
   */
  recordStep<T>(
    owner: OwnerMark,
    position: number,
    entry: { name: string; kind: 'step' | 'call' },
    work: (client: PoolClient) => Promise<{ value: T; text: string | null }>,
    signal: AbortSignal,
  ): Promise<T> {
    return this.fenced(owner, entry.name, signal, async (client) => {
      const recorded = await work(client);
      const { rowCount } = await client.query(
        `UPDATE ${this.table}
         SET steps = steps || jsonb_build_array(jsonb_build_object('name', $5::text, 'kind', $6::text, 'result', $7::text)),
             lease_until = now() + $8 * interval '1 millisecond', updated_at = now()
         WHERE scope = $1 AND flow_key = $2 AND fence = $3 AND status IS NULL
           AND jsonb_array_length(steps) = $4`,
        [
          owner.scope,
          owner.key,
          owner.fence,
          position,
          entry.name,
          entry.kind,
          recorded.text,
          this.leaseMs,
        ],
      );
      return { ok: rowCount === 1, value: recorded.value };
    });
  }

  /** Stores the final answer after `position` steps, fenced, in a transaction of its own. */
  storeAnswer(
    owner: OwnerMark,
    position: number,
    answer: FlowAnswer,
    signal: AbortSignal,
  ): Promise<void> {
    return this.fenced(owner, '(answer)', signal, async (client) => {
      const { rowCount } = await client.query(
        `UPDATE ${this.table}
         SET status = $5, headers = $6::jsonb, body = $7::json, finished_at = now(),
             lease_until = NULL, updated_at = now()
         WHERE scope = $1 AND flow_key = $2 AND fence = $3 AND status IS NULL
           AND jsonb_array_length(steps) = $4`,
        [
          owner.scope,
          owner.key,
          owner.fence,
          position,
          answer.status,
          answer.headers === undefined ? null : JSON.stringify(answer.headers),
          answer.body === undefined ? null : JSON.stringify(answer.body),
        ],
      );
      return { ok: rowCount === 1, value: undefined };
    });
  }

  /**
   * Unfinished flows of `names` whose lease expired, oldest expiry first: the
   * completer's candidates.
   */
  async abandoned(
    names: readonly string[],
    limit: number,
  ): Promise<Array<{ scope: string; key: string; flow: string }>> {
    const { rows } = await this.pool.query<{ scope: string; flow_key: string; flow: string }>(
      `SELECT scope, flow_key, flow FROM ${this.table}
       WHERE status IS NULL AND lease_until <= now() AND flow = ANY($1::text[])
       ORDER BY lease_until LIMIT $2`,
      [names, limit],
    );
    return rows.map((r) => ({ scope: r.scope, key: r.flow_key, flow: r.flow }));
  }

  /**
   * One fenced transaction: BEGIN, its id, `body` (false: fenced, rolled back), COMMIT.
   * A statement failing before COMMIT rolls back (the error goes on); COMMIT answered
   * ROLLBACK is a known rollback (StepFailedError); a COMMIT lost with its connection is
   * settled by the transaction's id (committed, aborted, or CommitUnknownError).
   */
  private async fenced<T>(
    owner: OwnerMark,
    step: string,
    signal: AbortSignal,
    body: (client: PoolClient) => Promise<{ ok: boolean; value: T }>,
  ): Promise<T> {
    const client = await acquireClient(this.pool, this.acquireTimeoutMs, signal);
    let broken: Error | undefined;
    // Whether the client is known to be back outside a transaction, usable again.
    let clean = false;
    let xid: string | undefined;
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ xid: string }>(
        'SELECT pg_current_xact_id()::text AS xid',
      );
      xid = rows[0]?.xid;
      let outcome: { ok: boolean; value: T };
      try {
        outcome = await body(client);
      } catch (error) {
        await client.query('ROLLBACK').then(
          () => (clean = true),
          (e: unknown) => (broken = e instanceof Error ? e : new Error(String(e))),
        );
        throw error;
      }
      if (!outcome.ok) {
        await client.query('ROLLBACK');
        clean = true;
        throw new FlowFencedError(owner.flow, owner.key, owner.fence);
      }
      let command: string | null;
      try {
        ({ command } = await client.query('COMMIT'));
      } catch (error) {
        broken = error instanceof Error ? error : new Error(String(error));
        const settled = await settledStatus(this.pool, xid ?? '', this.acquireTimeoutMs, signal);
        if (settled.kind === 'committed') return outcome.value;
        if (settled.kind === 'aborted') throw new StepFailedError(owner.flow, step, error);
        throw new CommitUnknownError(owner.key, error);
      }
      clean = true;
      if (command !== 'COMMIT')
        throw new StepFailedError(owner.flow, step, new Error(`COMMIT answered ${command}`));
      return outcome.value;
    } catch (error) {
      // One of the library's statements failed: the client may be mid-transaction or dead.
      if (broken === undefined && !clean)
        broken = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      client.release(broken);
    }
  }
}

function rowOf(raw: RawRow): FlowRow {
  return {
    flow: raw.flow,
    version: raw.version,
    origin: raw.origin,
    fingerprint: raw.fingerprint,
    input: raw.input,
    steps: raw.steps,
    fence: Number(raw.fence),
    live: raw.live,
    remainingMs: Number(raw.remaining_ms),
    answer:
      raw.status === null
        ? undefined
        : {
            status: raw.status,
            ...(raw.body !== null ? { body: JSON.parse(raw.body) as unknown } : {}),
            ...(raw.headers !== null ? { headers: raw.headers } : {}),
          },
  };
}
