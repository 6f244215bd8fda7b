import type { PoolClient } from 'pg';
import {
  CommitUnknownError,
  DatabaseError,
  EffectivelyOnceError,
  HandlerTimeoutError,
} from '../errors.js';
import { timeoutUntil } from '../deadline.js';
import type {
  BoundStatement,
  ClaimTransaction,
  ClaimTransactions,
  FailedAttempt,
  Released,
  TransactionEnd,
  WorkResult,
} from '../tx/claim-transaction.js';
import { infra } from '../tx/claim-transaction.js';
import { retryConflicts } from '../tx/conflicts.js';
import { type ClaimPlan, type Done, driveTransaction, runWork } from '../tx/drive.js';
import { readResponseBody } from './body.js';
import { bytesResponse, knownBytes } from './known-body.js';
import { failedAfterOwnCommitBody } from './problem.js';
import { adapterHooks, type AdapterHooks, type IdempotencyContext } from './context.js';
import { declaredBody } from './held-body.js';
import { IdempotencyKeyReusedError } from './errors.js';
import type { IdempotencyConfig } from './options.js';
import { recordOf, replayOf, withBody } from './replay.js';
import type {
  BodyOmitted,
  ClaimFound,
  KeyClaim,
  KeyStatements,
  ResponseRecord,
  StoredRecord,
} from './store.js';

/** How one request ended, before it is answered. */
export type Verdict =
  /**
   * Committed with its stored response; `response` is the handler's, body and all.
   * `record`: the key's row as committed, when it is known to hold the response (not
   * after a handler that committed itself), for the requests waiting on the key.
   */
  | { kind: 'executed'; response: Response; streaming: boolean; record?: StoredRecord }
  /** The key's committed row (`record`), answered. */
  | { kind: 'replayed'; response: Response; record: StoredRecord }
  /** The handler's own response asked for a rollback (a 5xx): sent as is, nothing kept. */
  | { kind: 'rolled-back'; response: Response }
  /** The user's code threw; the transaction rolled back. */
  | { kind: 'threw'; error: unknown }
  /** Refused without running: a key reused with another request (`record`: the key's row). */
  | { kind: 'refused'; error: EffectivelyOnceError; record?: StoredRecord }
  | FailedAttempt
  | Released;

/**
 * A job's handler: the context, and `request()`, a fresh copy of the request with its
 * buffered body for this run, built when called (a fetch-style handler calls it; an
 * adapter's does not).
 */
export type JobHandler<Tx = PoolClient> = (
  ctx: IdempotencyContext<Tx>,
  request: () => Request,
) => Response | Promise<Response>;

/** One request, everything that stays the same across its transaction's runs. */
export interface Job<Tx = PoolClient> {
  claim: KeyClaim;
  /** False for a request that had no key of its own: its row is dropped before COMMIT. */
  keyed: boolean;
  /** The request (bodyless for an adapter's buffered one), built when first asked for. */
  request: () => Request;
  body: Uint8Array;
  handler: JobHandler<Tx>;
  /**
   * An adapter's job: its handler needs no Request of its own, and the responses
   * answered (the handler's, replays) may be carriers, whose bytes it sends itself.
   */
  contextOnly?: boolean;
  /** How long the claim may wait on the key's row lock; default `lockTimeoutMs`. */
  waitMs?: number;
  /** When the handler must have returned (RequestOverrides.workDeadline); undefined: none. */
  workDeadline?: number | undefined;
}

/** What one run of a request's transaction learns on the way, for its answer. */
interface Run<Tx> {
  readonly job: Job<Tx>;
  /** This run's number (ctx.attempt): every transaction of the request counts. */
  readonly attempt: number;
  /** What the handler answered, once its body was read. */
  outcome: HandlerOutcome | undefined;
  /** What the COMMIT stores with the key. */
  stored: ResponseRecord | undefined;
}

/** A run's verdict, or a key row pruned between its claim and its read (claim again). */
type Attempt = Verdict | { kind: 'vanished' };

type HandlerOutcome =
  | {
      kind: 'store';
      response: Response;
      body: Uint8Array | ReadableStream<Uint8Array> | null;
      omitted: BodyOmitted | null;
      stored: Uint8Array | null;
      /** The body was not read out of `response`: it can be sent as it is. */
      unread: boolean;
    }
  | { kind: 'rollback'; response: Response };

/**
 * Runs requests through claim → handler → stored response + verified COMMIT: the
 * claim-transaction driver's sequence (src/tx/drive.ts), the consumer's, with a
 * response in place of the ack.
 */
export class Engine<Tx = PoolClient> {
  private readonly streamedResponses = new WeakSet<Response>();
  /** Replays' ROLLBACKs still on the wire (see releaseLater). */
  private readonly releasing = new Set<Promise<void>>();

  constructor(
    private readonly cfg: IdempotencyConfig<Tx>,
    private readonly statements: KeyStatements,
    private readonly transactions: ClaimTransactions<Tx>,
  ) {}

  /**
   * Runs the job's claim transaction, again in place while it loses serialization races
   * (bounded; past that a database failure, answered 503), or while the key's row
   * vanishes between the claim and its read (bounded).
   */
  run(job: Job<Tx>): Promise<Verdict> {
    let runs = 0;
    let vanished = 0;
    return retryConflicts<Verdict>(
      async () => {
        for (;;) {
          const end = await driveTransaction(this.transactions, this.plan(job, ++runs));
          if (end.kind !== 'vanished') return end;
          // The row was pruned between the claim and the read: claim again (bounded).
          if (++vanished > 3)
            return this.failed(new DatabaseError('claim', new Error('the key row kept vanishing')));
        }
      },
      { retries: this.cfg.serializationRetries, exhausted: 'infrastructure' },
      this.transactions.hardStop,
      job.claim.key,
    );
  }

  /** One transaction's steps for a request: claim, then the handler or the stored response. */
  private plan(job: Job<Tx>, attempt: number): ClaimPlan<ClaimFound, Attempt, Tx> {
    const { claim } = job;
    const waitMs = job.waitMs ?? this.cfg.lockTimeoutMs;
    const run: Run<Tx> = { job, attempt, outcome: undefined, stored: undefined };
    return {
      key: claim.key,
      target: {
        key: claim.key,
        scope: claim.scope,
        get request() {
          return job.request();
        },
      },
      claimWaitMs: waitMs,
      // A claim waiting on a key another instance holds is cancelled at the hard stop (the
      // driver runs it under untilHardStop), or close() would wait for it up to `lockTimeoutMs`.
      claim: (session) => this.statements.claim(session, claim, waitMs),
      claimed: async (found, conn) => {
        if (found.kind === 'stored') {
          // Answered without waiting for the ROLLBACK's round trip. Nothing after the read
          // can change the answer: the row was committed by another transaction (its
          // response stored in the COMMIT that made it visible, or `replay` refuses it),
          // this transaction wrote nothing (ON CONFLICT DO NOTHING, a transaction-local
          // setting), and the ROLLBACK's outcome was never looked at anyway. The connection
          // goes back to the pool only once the ROLLBACK returned (see releaseLater).
          // The answer is built first: should building it throw, the connection is still
          // the driver's alone to end (one owner, one close).
          const verdict = this.replay(claim, found.record, job.contextOnly === true);
          this.releaseLater(conn);
          return { kind: 'done', verdict, keepOpen: true };
        }
        if (found.kind === 'vanished') {
          await conn.rollback();
          return { kind: 'done', verdict: found };
        }
        return { kind: 'run', xid: found.xid };
      },
      work: (conn, xid) => this.execute(run, conn, xid),
      ended: (end, work, _durationMs, conn) => this.answered(run, end, work, conn),
    };
  }

  /** Resolves once every connection a replay answered ahead of is back in the pool. */
  async drain(): Promise<void> {
    while (this.releasing.size > 0) await Promise.allSettled([...this.releasing]);
  }

  /**
   * Rolls back the replay's empty transaction and returns its connection, in the
   * background. A ROLLBACK still out at the hard stop (a stalled socket) is abandoned,
   * its connection destroyed: close() waits for these, and must not wait past it.
   */
  private releaseLater(conn: ClaimTransaction<Tx>): void {
    // rollback() is bounded by the hard stop itself (abandoned there, destroyed on close);
    // it resolves to nothing, which untilHardStop would read as the hard stop's answer.
    const done: Promise<void> = conn
      .rollback()
      .then(() => conn.close())
      .catch((err: unknown) =>
        this.cfg.logger.warn({ err }, 'effectively-once: releasing a replay connection failed'),
      )
      .finally(() => this.releasing.delete(done));
    this.releasing.add(done);
  }

  /**
   * The handler on the guarded `ctx.tx`, its response's body read within its timeout,
   * and what the COMMIT stores with the key; or the request's end when the handler
   * rolled back by its answer or committed the claim's transaction itself.
   */
  private async execute(
    run: Run<Tx>,
    conn: ClaimTransaction<Tx>,
    xid: string,
  ): Promise<WorkResult | Done<Attempt>> {
    const { job, attempt } = run;
    const { claim } = job;
    // One copy per run, made when first asked for (an adapter's handler may never ask).
    let request: Request | undefined;
    const requestCopy = (): Request => (request ??= copyRequest(job.request(), job.body));
    const streamed = this.streamedResponses;
    const hooks: AdapterHooks = {
      maxBodyBytes: this.cfg.maxBodyBytes,
      workDone: () => conn.sealTx(),
    };
    // A host's hard end (Lambda's invocation) cuts the handler's timeout; once come, the
    // handler is not started and the claim rolls back.
    const timeoutMs = timeoutUntil(this.cfg.handlerTimeoutMs, job.workDeadline);
    if (timeoutMs === 'passed')
      return { kind: 'timeout', error: new HandlerTimeoutError(claim.key, 0) };
    const result = await runWork(
      conn,
      { timeoutMs, hardStop: this.transactions.hardStop, attempt },
      (tx, link) => {
        const ctx: IdempotencyContext<Tx> & { [adapterHooks]: AdapterHooks } = {
          tx,
          key: claim.key,
          scope: claim.scope,
          get signal() {
            return link.signal;
          },
          get request() {
            return requestCopy();
          },
          body: job.body,
          attempt,
          streamed: (response) => {
            streamed.add(response);
            return response;
          },
          [adapterHooks]: hooks,
        };
        return Promise.resolve(job.handler(ctx, requestCopy));
      },
      async (response: unknown) => {
        if (!isResponse(response))
          throw new TypeError('an idempotent handler must return a Response');
        run.outcome = await this.settleBody(response);
      },
    );
    const { outcome } = run;

    // The handler failed (threw, answered a 5xx, ran out of time) after committing the
    // claim's transaction itself: nothing is left to roll back, and the key row committed
    // without an answer. Store one now, or every retry meets an incomplete row. Not
    // knowing whether it did is answered as unknown, never as nothing applied.
    const failed =
      result.kind === 'threw' || result.kind === 'timeout' || outcome?.kind === 'rollback';
    if (failed) {
      const timedOut = result.kind === 'timeout';
      const outside = await conn.committedOutside(xid, timedOut);
      // The handler may still be running on the transaction's connection: end it first.
      if (outside !== 'not-committed' && timedOut) await conn.finish(result, xid);
      if (outside === 'committed')
        return {
          kind: 'done',
          verdict: await this.failedAfterOwnCommit(
            conn,
            job,
            'error' in result ? result.error : undefined,
            timedOut,
          ),
        };
      if (outside === 'unknown') {
        if (!timedOut) await conn.rollback();
        return {
          kind: 'done',
          verdict: infra(
            new CommitUnknownError(
              claim.key,
              new Error("could not tell whether the handler committed the claim's transaction"),
            ),
          ),
        };
      }
    }
    if (result.kind !== 'ok') return result;
    if (outcome?.kind === 'rollback') {
      await conn.rollback();
      return { kind: 'done', verdict: { kind: 'rolled-back', response: outcome.response } };
    }
    if (outcome === undefined)
      return { kind: 'threw', error: new Error('the handler settled without a response'), attempt };
    const record = recordOf(
      outcome.response,
      outcome.stored,
      outcome.omitted,
      this.cfg.storeHeaders,
    );
    run.stored = record;
    return {
      kind: 'ok',
      beforeCommit: this.lastStatement(conn, job, record),
    };
  }

  /** What the transaction's end means for the request: its answer. */
  private async answered(
    run: Run<Tx>,
    end: TransactionEnd,
    work: WorkResult,
    conn: ClaimTransaction<Tx>,
  ): Promise<Attempt> {
    const { job, outcome, stored } = run;
    const { claim } = job;
    if (end.kind === 'committed') {
      // The row as committed, response and all, unless the handler committed it itself.
      const record =
        job.keyed && end.warning === undefined && stored !== undefined
          ? storedOf(claim, stored)
          : undefined;
      if (end.warning !== undefined) {
        this.cfg.logger.warn(
          { err: end.warning, key: claim.key },
          'effectively-once: committed oddly',
        );
        // The handler committed the claim's transaction itself (`tx.query('…; COMMIT')`):
        // the key row committed without its response, which the COMMIT's round trip never
        // got to store. Store it now, in a statement of its own, before answering; else
        // every retry would meet an incomplete row for the key's whole lifetime.
        if (work.kind === 'ok' && work.beforeCommit !== undefined)
          await this.completeAfterCommit(conn, work.beforeCommit, claim.key);
      }
      if (outcome?.kind !== 'store') throw new Error('unreachable: committed without a response');
      await this.committed(claim, outcome.response.status);
      return {
        kind: 'executed',
        response: outcome.unread ? outcome.response : withBody(outcome.response, outcome.body),
        streaming: outcome.body instanceof ReadableStream,
        ...(record !== undefined ? { record } : {}),
      };
    }
    if (outcome?.kind === 'store' && outcome.body instanceof ReadableStream)
      await outcome.body.cancel().catch(() => undefined);
    if (end.kind === 'failed' && work.kind === 'threw' && !end.infrastructure && !end.conflict)
      return { kind: 'threw', error: work.error };
    // A query the handler sent after settling was refused: its fault, for its error handler.
    if (end.kind === 'failed' && end.error === conn.lateUse)
      return { kind: 'threw', error: end.error };
    return end;
  }

  /** Reads the body (as far as it is kept) inside the transaction's time. */
  private async settleBody(response: Response): Promise<HandlerOutcome> {
    if (this.cfg.rollbackOn(response.status)) return { kind: 'rollback', response };
    const store = { kind: 'store', response, unread: false } as const;
    if (this.streamedResponses.has(response))
      return { ...store, body: response.body, omitted: 'stream', stored: null };
    // A body the adapter holds and sends itself (Express's res, a Fastify stream payload).
    const held = declaredBody(response);
    if (held !== undefined) {
      const kept = await held.seal();
      return { ...store, body: null, omitted: kept.omitted, stored: kept.bytes, unread: true };
    }
    // Bytes the adapter serialized itself: no stream to read, no second Response to
    // build; the response goes out as it is (a carrier has no body to read anyway).
    const bytes = knownBytes(response);
    if (bytes !== undefined)
      return bytes.byteLength <= this.cfg.maxBodyBytes
        ? { ...store, body: bytes, omitted: null, stored: bytes, unread: true }
        : { ...store, body: bytes, omitted: 'too-large', stored: null, unread: true };
    const read = await readResponseBody(response.body, this.cfg.maxBodyBytes);
    if (read.kind === 'complete')
      return { ...store, body: read.bytes, omitted: null, stored: read.bytes };
    return { ...store, body: read.stream, omitted: 'too-large', stored: null };
  }

  /**
   * What the COMMIT stores with the key (or, for a request without a key of its own, the
   * row dropped): text for the library's own client, which pipelines it with COMMIT; one
   * statement with its values for a data layer's.
   */
  private lastStatement(
    conn: ClaimTransaction<Tx>,
    job: Job<Tx>,
    record: ResponseRecord,
  ): string | BoundStatement {
    const { claim } = job;
    if (conn.pg !== undefined)
      return job.keyed
        ? this.statements.storeResponse(claim, record)
        : this.statements.forget(claim);
    return job.keyed
      ? this.statements.storeResponseBound(claim, record)
      : this.statements.forgetBound(claim);
  }

  /**
   * Stores and answers the fixed problem of a handler that committed itself and then
   * failed: the request did commit (its key is taken, what the handler committed
   * stays), so it is an execution, answered the same way first and on every replay.
   */
  private async failedAfterOwnCommit(
    conn: ClaimTransaction<Tx>,
    job: Job<Tx>,
    error: unknown,
    onPool: boolean,
  ): Promise<Verdict> {
    const { claim } = job;
    this.cfg.logger.error(
      { err: error, key: claim.key },
      'effectively-once: the handler committed its transaction itself, then failed',
    );
    const { status, headers, body } = failedAfterOwnCommitBody(this.cfg);
    const response = bytesResponse(body, { status, headers });
    if (job.keyed) {
      const record = recordOf(response, body, null, this.cfg.storeHeaders);
      await this.completeAfterCommit(
        conn,
        this.statements.storeResponseBound(claim, record),
        claim.key,
        onPool,
      );
    }
    await this.committed(claim, status);
    return { kind: 'executed', response, streaming: false };
  }

  /**
   * Runs the stored-response statement in autocommit, after a commit the handler made: on
   * the claim's own session when the library holds it (outside a transaction by now), on
   * the pool when a data layer held it (its transaction is over and its runner refuses)
   * or `onPool` (the session was ended under a handler that ran out of time).
   */
  private async completeAfterCommit(
    conn: ClaimTransaction<Tx>,
    statement: string | BoundStatement,
    key: string,
    onPool = false,
  ): Promise<void> {
    const { text, values } =
      typeof statement === 'string' ? { text: statement, values: [] } : statement;
    try {
      if (conn.pg === undefined || onPool) await conn.pool.query(text, [...values]);
      else await conn.client.query(text, values);
    } catch (err) {
      // The effect committed: answering it is still right, but retries will find no response.
      this.cfg.logger.error(
        { err, key },
        'effectively-once: could not store the response after the handler committed',
      );
    }
  }

  private async committed(claim: KeyClaim, status: number): Promise<void> {
    try {
      await this.cfg.onCommitted?.({
        scope: claim.scope,
        key: claim.key,
        method: claim.method,
        route: claim.route,
        status,
      });
    } catch (err) {
      this.cfg.logger.error({ err, key: claim.key }, 'effectively-once: onCommitted threw');
    }
  }

  /**
   * A key committed before: its response, unless the request is not the one it was for.
   * Also how a request that waited behind another of its key is answered from the row
   * that one committed or found.
   */
  replay(claim: KeyClaim, record: StoredRecord, carrier: boolean): Verdict {
    if (record.method !== claim.method || record.route !== claim.route)
      return {
        kind: 'refused',
        error: new IdempotencyKeyReusedError(claim.key, 'endpoint', {
          storedMethod: record.method,
          storedRoute: record.route,
        }),
        record,
      };
    if (!record.fingerprint.equals(claim.fingerprint))
      return {
        kind: 'refused',
        error: new IdempotencyKeyReusedError(claim.key, 'fingerprint'),
        record,
      };
    const status = record.status;
    if (status === null)
      // Cannot be: the response is stored in the transaction that commits the row.
      return this.failed(
        new EffectivelyOnceError(
          'EO_IDEMPOTENCY_RECORD_INCOMPLETE',
          'The stored key has no response',
          {
            retryable: false,
            details: { key: claim.key },
          },
        ),
      );
    let response: Response;
    try {
      response = replayOf({ ...record, status }, carrier);
    } catch (cause) {
      // A row the library did not write as it is (edited by hand, say): answered as a
      // failure of the key's record, never thrown past the claim that read it.
      return this.failed(
        new EffectivelyOnceError(
          'EO_IDEMPOTENCY_RECORD_UNREADABLE',
          'The stored response cannot be replayed',
          { retryable: false, details: { key: claim.key }, cause },
        ),
      );
    }
    return { kind: 'replayed', response, record };
  }

  private failed(error: EffectivelyOnceError): FailedAttempt {
    return { kind: 'failed', error, infrastructure: true, conflict: false };
  }
}

/**
 * The key's row as the COMMIT that stored `response` left it. The body is a copy: the
 * handler's own bytes go out to its client, these to every request answered from them.
 */
function storedOf(claim: KeyClaim, response: ResponseRecord): StoredRecord {
  return {
    method: claim.method,
    route: claim.route,
    fingerprint: claim.fingerprint,
    status: response.status,
    headers: response.headers,
    body: response.body === null ? null : Buffer.from(response.body),
    bodyOmitted: response.bodyOmitted,
  };
}

/** The key's committed row a verdict ended with, if it knows one. */
export function committedRow(verdict: Verdict): StoredRecord | undefined {
  return verdict.kind === 'executed' || verdict.kind === 'replayed' || verdict.kind === 'refused'
    ? verdict.record
    : undefined;
}

/** A fresh Request with the buffered body: each run of the handler may read it. */
function copyRequest(request: Request, body: Uint8Array): Request {
  const bodyless = request.method === 'GET' || request.method === 'HEAD';
  return new Request(request.url, {
    method: request.method,
    headers: request.headers,
    body: bodyless || body.byteLength === 0 ? null : body,
    signal: request.signal,
  });
}

/**
 * Structural, not `instanceof`: servers that swap the global Response for their own
 * class (@hono/node-server does) would fail a Response created before the swap.
 */
function isResponse(value: unknown): value is Response {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Partial<Response>;
  return (
    typeof candidate.status === 'number' &&
    typeof candidate.headers?.get === 'function' &&
    'body' in candidate
  );
}
