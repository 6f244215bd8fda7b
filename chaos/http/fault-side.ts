import type { IncomingMessage, ServerResponse } from 'node:http';
import pg from 'pg';
import type { IdempotencyContext } from 'effectively-once/http';
import { sleep } from '../../src/sleep.js';
import { guardNewClients } from '../../src/tx/acquire.js';
import { tables, type ChaosTables } from '../consumer/db.js';
import { HandlerFaults } from '../consumer/fault-effects.js';
import { faultTables } from './fault-db.js';
import { FAULT_TIMEOUT_MS, type FaultSpec } from './fault-plan.js';

/** Response header naming the operation and the handler run that made the answer. */
export const ANSWER_HEADER = 'x-chaos-answer';

/** What a fault operation's request says about itself. */
export interface OpRequest {
  op: string;
  spec: FaultSpec;
}

/** The operation id (header) and its fault (body) of a request to a fault route. */
export function opOf(header: string | string[] | undefined, body: unknown): OpRequest {
  const spec = (body as { spec?: FaultSpec } | null)?.spec;
  if (typeof header !== 'string' || spec === undefined)
    throw new Error('a fault route needs x-chaos-op and a body with its spec');
  return { op: header, spec };
}

/** The JSON answer of a run (what `x-chaos-answer` says, and whose it is). */
export function answerOf(op: string, run: number, ctx: IdempotencyContext): object {
  return { op, run, tenant: ctx.scope, key: ctx.key };
}

/**
 * The server side of the fault routes: run ids, the fault log (written with autocommit
 * on a pool of its own, so a rolled-back run still counts), effect rows through
 * `ctx.tx`, the consumer harness's deferred-FK and killed-backend faults, and the
 * answer times of runs that time out on purpose.
 */
export class FaultSide {
  private readonly started = new WeakMap<
    IncomingMessage,
    { op: string; run: number; at: number }
  >();
  private readonly t: ChaosTables;
  private readonly f: ReturnType<typeof faultTables>;

  private constructor(
    private readonly pool: pg.Pool,
    private readonly faults: HandlerFaults,
    schema: string,
  ) {
    this.t = tables(schema);
    this.f = faultTables(schema);
  }

  static async create(databaseUrl: string, schema: string): Promise<FaultSide> {
    const pool = new pg.Pool({
      connectionString: databaseUrl,
      max: 4,
      connectionTimeoutMillis: 5000,
    });
    // Terminations and restarts on purpose: idle clients report them here, new ones to
    // a listener of their own (or a FATAL at connect would end the server).
    pool.on('error', () => undefined);
    guardNewClients(pool);
    // No attempt limit: a transient fault fires on the operation's first runs, however many.
    const faults = await HandlerFaults.create(databaseUrl, tables(schema), 0, Infinity);
    return new FaultSide(pool, faults, schema);
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.end().catch(() => undefined), this.faults.close()]);
  }

  /** A new handler run: its id. */
  async begin(): Promise<number> {
    const { rows } = await this.pool.query<{ run: string }>(
      `SELECT nextval('${this.f.runs}')::text AS run`,
    );
    return Number(rows[0]?.run);
  }

  /** The effects table, qualified. */
  get effectsTable(): string {
    return this.f.effects;
  }

  /** The SQL that takes a run id, for a handler that starts on `ctx.tx` at once. */
  get nextRunSql(): string {
    return `nextval('${this.f.runs}')`;
  }

  /** Whether `label`'s fault fires on this run: on the operation's first `n` runs that reach it. */
  async fires(op: string, run: number, label: string, n: number): Promise<boolean> {
    if (n <= 0) return false;
    const { rowCount } = await this.pool.query(
      `INSERT INTO ${this.t.faultLog} (key, kind, attempt, worker, pid)
         SELECT $1, $2, $3, 0, $4
          WHERE (SELECT count(*) FROM ${this.t.faultLog} WHERE key = $1 AND code IS NULL) < $5`,
      [op, label, run, process.pid, n],
    );
    return rowCount === 1;
  }

  /** One effect row, through the claim's transaction. */
  async effect(ctx: IdempotencyContext, op: string, run: number, part: string): Promise<void> {
    await ctx.tx.query(
      `INSERT INTO ${this.f.effects} (op, run, part, tenant) VALUES ($1, $2, $3, $4)`,
      [op, run, part, ctx.scope],
    );
  }

  /** On the operation's first `n` runs: a deferred FK violation, so COMMIT fails (23503). */
  async failCommit(ctx: IdempotencyContext, op: string, run: number, n: number): Promise<void> {
    if (n > 0) await this.faults.commit(ctx.tx, op, run, { kind: 'deferred', fires: n });
  }

  /**
   * The async kinds' handler body, the same on both frameworks: the effect and the
   * fault. `raw`: the request, for the answer time of a run that times out on purpose.
   */
  async body(
    ctx: IdempotencyContext,
    req: OpRequest,
    run: number,
    raw: IncomingMessage,
  ): Promise<void> {
    const { op, spec } = req;
    switch (spec.kind) {
      case 'ignore-signal':
        if (await this.fires(op, run, 'ignore-signal', spec.fires)) {
          this.timed(raw, op, run);
          await sleep(FAULT_TIMEOUT_MS + 500); // ctx.signal aborted meanwhile: ignored
        }
        return this.effect(ctx, op, run, 'main');
      case 'saturated-pool':
        if (await this.fires(op, run, 'saturated-pool', spec.fires)) {
          this.timed(raw, op, run);
          await ctx.tx.query(`SELECT pg_sleep(${(FAULT_TIMEOUT_MS * 2.5) / 1000})`);
        }
        return this.effect(ctx, op, run, 'main');
      case 'backend-killed':
        await this.effect(ctx, op, run, 'main');
        await this.faults.commit(ctx.tx, op, run, {
          kind: 'backend-killed',
          fires: spec.fires,
          by: spec.variant === 'self-throw' ? 'self' : 'other',
          then: spec.variant === 'self-throw' ? 'throw' : 'swallow',
        });
        return;
      case 'floating': {
        await this.effect(ctx, op, run, 'main');
        await this.failCommit(ctx, op, run, spec.fires);
        // Left running: a write from a timer, after the handler returned.
        setTimeout(
          () => void this.effect(ctx, op, run, 'floating').catch(() => undefined),
          run % 7,
        );
        return;
      }
      case 'deferred':
        await this.effect(ctx, op, run, 'main');
        return this.failCommit(ctx, op, run, spec.fires);
      default:
        return this.effect(ctx, op, run, 'main');
    }
  }

  /** The run times out on purpose: when its answer goes (or its connection closes) is recorded. */
  private timed(raw: IncomingMessage, op: string, run: number): void {
    this.started.set(raw, { op, run, at: Date.now() });
  }

  /** The server's hook on every request: records the answer time of a run marked `timed`. */
  watch(req: IncomingMessage, res: ServerResponse): void {
    let done = false;
    const record = (answered: boolean): void => {
      const started = this.started.get(req);
      if (done || started === undefined) return;
      done = true;
      void this.pool
        .query(
          `INSERT INTO ${this.f.timings} (op, run, status, answered, ms) VALUES ($1, $2, $3, $4, $5)`,
          [
            started.op,
            started.run,
            answered ? res.statusCode : null,
            answered,
            Date.now() - started.at,
          ],
        )
        .catch(() => undefined);
    };
    res.once('finish', () => record(true));
    res.once('close', () => record(res.writableFinished));
  }
}
