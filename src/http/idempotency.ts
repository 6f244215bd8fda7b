import { randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from 'pg';
import { setMaxListeners } from 'node:events';
import {
  ClaimBusyError,
  DatabaseError,
  EffectivelyOnceError,
  HandlerTimeoutError,
  ShutdownError,
} from '../errors.js';
import { timeoutUntil, untilAborted } from '../deadline.js';
import { EventHub } from '../event-hub.js';
import { RetentionPruner } from '../retention.js';
import { sleep } from '../sleep.js';
import { type ClaimTransactions, withReplica } from '../tx/claim-transaction.js';
import { type ConnectionDeps, pgClaimTransactions } from '../tx/claim-connection.js';
import { layerClaimTransactions } from '../tx/layer-transaction.js';
import { checkRequestBody, readRequestBody } from './body.js';
import type { IdempotentHandler } from './context.js';
import { committedRow, Engine, type Job, type JobHandler, type Verdict } from './engine.js';
import { IdempotencyKeyMissingError } from './errors.js';
import {
  executeBuffered,
  headOf,
  type CloseOptions,
  type ContextHandler,
  type Execution,
  type Idempotency,
  type IdempotencyEventName,
  type IdempotencyEvents,
  type IdempotencyStats,
  type RequestHead,
  type RequestOverrides,
} from './idempotency-types.js';
import { fingerprint } from './fingerprint.js';
import { KeyFlights } from './waiters.js';
import {
  admitDelivery,
  asIdempotentHandler,
  checkWebhookOptions,
  type WebhookHandler,
  type WebhookOptions,
  webhookScope,
} from './webhooks.js';
import { parseIdempotencyKey } from './key.js';
import {
  checkScope,
  checkStoredScope,
  resolveOptions,
  type IdempotencyConfig,
  type IdempotencyOptions,
} from './options.js';
import { databaseUnavailable, handlerFailedResponse, problemResponse } from './problem.js';
import type { HttpRequestScope, HttpTelemetryOutcome } from './telemetry.js';
import { checkMigratedAtStart } from '../store/migrator.js';
import { replicaGuard, type ReplicaGuard } from '../replica/guard.js';
import { DEFAULT_DATABASE } from '../routing/options.js';
import { Router } from '../routing/router.js';
import { routedTransactions } from '../tx/routed.js';
import { stepsEndpoint, type StepsHost } from '../steps/http-door.js';
import type { Flow, StepsRouteOptions } from '../steps/types.js';
import {
  idempotencyKeyTables,
  KeyStatements,
  migrateKeyTable,
  pruneIdempotencyKeys,
  type PruneKeysOptions,
} from './store.js';

/**
 * Makes endpoints idempotent under the `Idempotency-Key` header (IETF httpapi draft,
 * Stripe): each request's key is claimed in `eo_idempotency_keys` inside the
 * transaction the handler writes its effect with, the handler's response is stored in
 * that same transaction, and only after the verified COMMIT is it sent. A retry of a
 * committed request gets that response again (`Idempotent-Replayed: true`); a retry
 * that arrives while the original runs waits for it. Options are validated here; a
 * {@link ConfigurationError} names the first bad one.
 */
export function createIdempotency<Tx = PoolClient>(
  options: IdempotencyOptions<Tx>,
): Idempotency<Tx> {
  return new IdempotencyImpl<Tx>(resolveOptions(options));
}

class IdempotencyImpl<Tx> implements Idempotency<Tx> {
  private readonly engine: Engine<Tx>;
  private readonly hardStop = new AbortController();
  private readonly pruner: RetentionPruner | undefined;
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly flights: KeyFlights;
  private readonly counters: IdempotencyStats = {
    executed: 0,
    replayed: 0,
    rolledBack: 0,
    mismatched: 0,
    busy: 0,
    failed: 0,
  };
  private readonly hub: EventHub<IdempotencyEvents>;
  /** The door's databases (one without routing), each with its replica guard (`replicaSafe`). */
  private readonly databases: ReadonlyArray<{
    name: string;
    pool: Pool;
    replica: ReplicaGuard | undefined;
    transactions: ClaimTransactions<Tx>;
  }>;
  /** Routing: where each key lives (shared with the driver's routed transactions). */
  private readonly router: Router | undefined;
  /** Each database's migration (or its check) and replica check, done once it succeeded. */
  private readonly ready = new Map<string, Promise<void>>();
  private closing: Promise<void> | undefined;

  constructor(private readonly cfg: IdempotencyConfig<Tx>) {
    this.hub = new EventHub<IdempotencyEvents>(cfg.logger, 'idempotency');
    // Every request waiting for a connection listens to it: as many as the server takes.
    setMaxListeners(0, this.hardStop.signal);
    // Each database (one without routing) has its own replica guard and claim
    // transactions; the driver picks the key's database per transaction.
    this.router = cfg.routing && new Router(cfg.routing);
    this.databases = cfg.databases.map((db) => {
      const replica = replicaGuard(db.pool, cfg.replicaSafe, cfg.logger);
      replica?.onReport((report) => this.hub.emit('replica', report));
      const deps: ConnectionDeps = {
        pool: db.pool,
        // No deliveries to pause here: a request fails with 503 and the client retries.
        health: {
          markDown: (cause) =>
            cfg.logger.warn(
              { err: cause, ...(cfg.routing ? { database: db.name } : {}) },
              'effectively-once: database unavailable',
            ),
        },
        logger: cfg.logger,
        acquireTimeoutMs: cfg.acquireTimeoutMs,
        hardStop: this.hardStop.signal,
      };
      const layered = { ...cfg, dataLayer: db.dataLayer as IdempotencyConfig<Tx>['dataLayer'] };
      const transactions = withReplica(claimTransactions(layered, deps), replica);
      return { name: db.name, pool: db.pool, replica, transactions };
    });
    this.engine = new Engine<Tx>(
      cfg,
      new KeyStatements(cfg.table, cfg.isolationLevel, cfg.retention?.olderThanMs),
      routedTransactions(this.databases, this.router),
    );
    this.flights = new KeyFlights(this.hardStop.signal);
    const retention = cfg.retention;
    this.pruner =
      retention &&
      new RetentionPruner(retention.intervalMs, (signal) => this.prune({ signal }), {
        pruned: (deleted, durationMs) => {
          cfg.logger.debug({ deleted, durationMs }, 'effectively-once: pruned idempotency keys');
          if (this.hub.listens('pruned')) this.hub.emit('pruned', { deleted, durationMs });
        },
        error: (err) => {
          if (this.hub.listens('error')) this.hub.emit('error', err);
          else cfg.logger.warn({ err }, 'effectively-once: pruning idempotency keys failed');
        },
      });
  }

  handler(
    handler: IdempotentHandler<Tx>,
    overrides?: RequestOverrides,
  ): (request: Request) => Promise<Response> {
    return (request) => this.handle(request, handler, overrides);
  }

  webhook(
    options: WebhookOptions,
    handler: WebhookHandler<Tx>,
  ): (request: Request) => Promise<Response> {
    checkWebhookOptions(options);
    return this.handler(asIdempotentHandler(handler), { webhook: options });
  }

  steps<I>(
    flow: Flow<I>,
    options: StepsRouteOptions<I> = {},
  ): (request: Request) => Promise<Response> {
    const host: StepsHost = {
      cfg: this.cfg,
      hardStop: this.hardStop.signal,
      track: (running) => {
        this.inFlight.add(running);
        void running.finally(() => this.inFlight.delete(running));
      },
      closing: () => this.closing !== undefined,
    };
    return stepsEndpoint(host, flow, options);
  }

  async handle(
    request: Request,
    handler: IdempotentHandler<Tx>,
    overrides?: RequestOverrides,
  ): Promise<Response> {
    return (await this.execute(request, handler, overrides)).response;
  }

  execute(
    request: Request,
    handler: IdempotentHandler<Tx>,
    overrides: RequestOverrides = {},
  ): Promise<Execution> {
    const head = headOf(request);
    const run: JobHandler<Tx> = (ctx, copy) => handler(copy(), ctx);
    return this.track(head, (scope) => this.run(head, run, overrides, undefined, scope));
  }

  [executeBuffered](
    head: RequestHead,
    body: Uint8Array,
    handler: ContextHandler<Tx>,
    overrides: RequestOverrides = {},
  ): Promise<Execution> {
    if (overrides.webhook !== undefined) {
      // Verification reads the body from the request: give it one.
      const bodyless = head.method === 'GET' || head.method === 'HEAD';
      const request = new Request(head.request(), { body: bodyless ? null : body });
      return this.execute(request, (_request, ctx) => handler(ctx), overrides);
    }
    return this.track(head, (scope) => this.run(head, handler, overrides, body, scope));
  }

  /** Runs a request in its telemetry scope (if any) and counts it in flight until it ends. */
  private track(
    head: RequestHead,
    start: (scope: HttpRequestScope | undefined) => Promise<Execution>,
  ): Promise<Execution> {
    const scope = this.startTelemetry(head);
    const running = scope === undefined ? start(undefined) : this.traced(scope, () => start(scope));
    this.inFlight.add(running);
    void running.finally(() => this.inFlight.delete(running));
    return running;
  }

  async migrate(): Promise<void> {
    for (const db of this.databases) await migrateKeyTable(db.pool, this.cfg.table);
  }

  prune(
    options: Partial<Pick<PruneKeysOptions, 'olderThan' | 'scope' | 'batchSize' | 'signal'>> = {},
  ): Promise<number> {
    const retention = this.cfg.retention;
    // Without a window: the keys whose own expiry passed, whoever claimed them; never
    // one of unknown lifetime (an earlier version's, whose retention may be longer).
    const each = this.databases.map((db) =>
      pruneIdempotencyKeys(db.pool, {
        schema: this.cfg.table.schema,
        table: this.cfg.table.table,
        ...(options.olderThan !== undefined ? { olderThan: options.olderThan } : {}),
        batchSize: options.batchSize ?? retention?.batchSize,
        dutyCycle: retention?.dutyCycle,
        ...(options.scope !== undefined ? { scope: options.scope } : {}),
        ...(options.signal !== undefined ? { signal: options.signal } : {}),
      }),
    );
    // Every database is pruned (one down fails the sum, not the others' pruning).
    return Promise.allSettled(each).then((results) => {
      let deleted = 0;
      for (const r of results) {
        if (r.status === 'rejected') throw r.reason;
        deleted += r.value;
      }
      return deleted;
    });
  }

  stats(): IdempotencyStats {
    return {
      ...this.counters,
      // Routing: the first database's standby (a status per database is not reported yet).
      ...(this.databases[0]?.replica !== undefined
        ? { replica: this.databases[0].replica.status() }
        : {}),
    };
  }

  on<E extends IdempotencyEventName>(
    event: E,
    listener: (payload: IdempotencyEvents[E]) => void,
  ): Idempotency<Tx> {
    this.hub.on(event, listener);
    return this;
  }

  off<E extends IdempotencyEventName>(
    event: E,
    listener: (payload: IdempotencyEvents[E]) => void,
  ): Idempotency<Tx> {
    this.hub.off(event, listener);
    return this;
  }

  close(options: CloseOptions = {}): Promise<void> {
    this.closing ??= this.shutdown(options.timeoutMs ?? 10_000);
    return this.closing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private async shutdown(graceMs: number): Promise<void> {
    const grace = new AbortController();
    // The grace period runs from close() on, whatever the pruner does: its tick may be
    // queued behind the very requests being drained. Its stop leaves the pool's queue at
    // once and waits for a running prune statement only until the hard stop.
    const graceOver = sleep(graceMs, grace.signal);
    const pruned = this.pruner?.stop(this.hardStop.signal);
    // A replay is answered before its ROLLBACK returns: close() resolves once that
    // connection, too, is back in the pool, or (a ROLLBACK still out at the hard stop)
    // destroyed.
    const all = Promise.allSettled([...this.inFlight, pruned]).then(() => this.engine.drain());
    await Promise.race([all, graceOver]);
    grace.abort();
    this.hardStop.abort(new ShutdownError('(closing)'));
    for (const db of this.databases) db.replica?.close();
    await Promise.allSettled([...this.inFlight, pruned]);
    await this.engine.drain();
  }

  /** The telemetry scope of a request; a throwing hook only costs the request its telemetry. */
  private startTelemetry(head: RequestHead): HttpRequestScope | undefined {
    const telemetry = this.cfg.telemetry;
    if (telemetry === undefined) return undefined;
    try {
      return telemetry.startRequest(head.request());
    } catch (err) {
      this.cfg.logger.warn({ err }, 'effectively-once: telemetry startRequest threw');
      return undefined;
    }
  }

  /** Runs a request inside its telemetry scope and reports how it ended (one place for all). */
  private async traced(scope: HttpRequestScope, run: () => Promise<Execution>): Promise<Execution> {
    let started: Promise<Execution> | undefined;
    const once = (): Promise<Execution> => (started ??= run());
    let execution: Execution;
    try {
      execution = await scope.run(once);
    } catch (err) {
      // run() never rejects: this is the hook. The request still runs, once.
      this.cfg.logger.warn({ err }, 'effectively-once: telemetry run threw');
      execution = await once();
    }
    const status = execution.response.status;
    let outcome: HttpTelemetryOutcome;
    if (execution.kind === 'threw') outcome = 'failed';
    // A problem answer of 409 is the claim still held by the original (ClaimBusyError).
    else if (execution.outcome === 'refused' || execution.outcome === 'failed')
      outcome = status === 409 ? 'in-progress' : execution.outcome;
    else outcome = execution.outcome;
    try {
      scope.end({
        outcome,
        status,
        ...(execution.kind === 'threw' ? { error: execution.error } : {}),
      });
    } catch (err) {
      this.cfg.logger.warn({ err }, 'effectively-once: telemetry end threw');
    }
    return execution;
  }

  /**
   * One request: admission, claim, handler. `buffered`: the body, already read by an
   * adapter (then `request` is its bodyless head). `deliveryScope`: an admitted webhook
   * delivery's scope (see webhookScope), which no plain scope, overrides' included, can be.
   */
  private async run(
    head: RequestHead,
    handler: JobHandler<Tx>,
    overrides: RequestOverrides,
    buffered?: Uint8Array,
    telemetry?: HttpRequestScope,
    deliveryScope?: string,
  ): Promise<Execution> {
    const cfg = this.cfg;
    if (this.closing !== undefined) return this.problem(new ShutdownError('(closed)'), 'failed');
    if (overrides.webhook !== undefined) {
      const admission = await admitDelivery(
        overrides.webhook,
        head.request(),
        cfg.maxRequestBytes,
        this.hardStop.signal,
      );
      if (admission.kind === 'refused')
        return this.stopped(admission.error) ?? this.problem(admission.error, 'refused');
      if (admission.kind === 'threw') return this.threw(admission.error);
      const { key, door, fingerprint: mode } = admission;
      // The tenant composes with the sender's namespace (see webhookScope): the
      // adapter's per-request scope, else the endpoint's when it is per request.
      let tenant: string | undefined;
      try {
        tenant =
          overrides.scope ??
          (cfg.constantScope === undefined
            ? await this.untilHardStop(cfg.scope(admission.request.clone()))
            : undefined);
        if (tenant !== undefined) checkScope(tenant);
      } catch (error) {
        return this.stopped(error) ?? this.threw(error);
      }
      let scope: string;
      try {
        // Outside every plain scope (see webhookScope), so passed on beside the overrides.
        scope = checkStoredScope(webhookScope(door, tenant));
      } catch (error) {
        return this.threw(error);
      }
      const { scope: _tenant, ...plain } = overrides;
      const rest = { ...plain, webhook: undefined, key };
      return this.run(
        headOf(admission.request),
        handler,
        mode ? { ...rest, fingerprint: mode } : rest,
        undefined,
        telemetry,
        scope,
      );
    }
    let key: string | undefined;
    try {
      const raw = overrides.key ?? head.header(cfg.header);
      key = parseIdempotencyKey(raw, cfg.header, cfg.maxKeyLength);
    } catch (error) {
      return this.problem(error as EffectivelyOnceError, 'refused');
    }
    const method = head.method.toUpperCase();
    if (key === undefined && cfg.methods.has(method))
      return this.problem(new IdempotencyKeyMissingError(`${cfg.header} header`), 'refused');
    let body: Uint8Array;
    try {
      body =
        buffered === undefined
          ? await readRequestBody(head.request(), cfg.maxRequestBytes, this.hardStop.signal)
          : checkRequestBody(head.header('content-length'), buffered, cfg.maxRequestBytes);
    } catch (error) {
      const stopped = this.stopped(error);
      if (stopped !== undefined) return stopped;
      if (error instanceof EffectivelyOnceError) return this.problem(error, 'refused');
      return this.threw(error);
    }
    let scope: string;
    let route: string;
    let fp: Buffer;
    try {
      const url = new URL(head.url);
      scope =
        deliveryScope ??
        checkScope(
          overrides.scope ??
            cfg.constantScope ??
            (await this.untilHardStop(cfg.scope(head.request()))),
        );
      route = overrides.route ?? (cfg.routeIsPath ? url.pathname : cfg.route(head.request()));
      if (typeof route !== 'string') throw new TypeError('route() must return a string');
      fp = fingerprint(
        {
          method,
          route,
          search: url.search,
          body,
          contentType: head.header('content-type'),
        },
        overrides.fingerprint ?? cfg.fingerprint,
      );
    } catch (error) {
      return this.stopped(error) ?? this.threw(error);
    }
    try {
      const template = overrides.route ?? (cfg.routeIsPath ? overrides.routeTemplate : route);
      telemetry?.identified({ key, route, ...(template !== undefined ? { template } : {}) });
    } catch (err) {
      cfg.logger.warn({ err }, 'effectively-once: telemetry identified threw');
    }
    const claimKey = key ?? randomUUID();
    let database = DEFAULT_DATABASE;
    try {
      // Routing: the key's database is made ready (migrated) before its first request.
      // The driver asks the route again for the transaction: the router's memory of the
      // key refuses a route that answers otherwise the second time.
      if (this.router !== undefined)
        database = this.router.route({
          key: claimKey,
          scope,
          get request() {
            return head.request();
          },
        });
    } catch (error) {
      cfg.logger.error({ err: error, key: claimKey }, 'effectively-once: routing failed');
      return this.problem(error as EffectivelyOnceError, 'failed');
    }
    try {
      // The migration may wait for a pool connection without bound (pg's default).
      await this.untilHardStop(this.prepare(database));
    } catch (error) {
      const stopped = this.stopped(error);
      if (stopped !== undefined) return stopped;
      cfg.logger.error({ err: error }, 'effectively-once: key table migration failed');
      return this.problem(error as EffectivelyOnceError, 'failed');
    }
    const { workDeadline } = overrides;
    // A host's hard end bounds the wait for the key too: what is left of it, less nothing.
    const waitMs = timeoutUntil(cfg.lockTimeoutMs, workDeadline);
    if (waitMs === 'passed')
      return this.problem(new HandlerTimeoutError(key ?? '(no key)', 0), 'failed');
    const job: Job<Tx> = {
      claim: { scope, key: claimKey, method, route, fingerprint: fp },
      keyed: key !== undefined,
      request: () => head.request(),
      body,
      handler,
      contextOnly: buffered !== undefined,
      ...(workDeadline !== undefined ? { waitMs, workDeadline } : {}),
    };
    // 'reject' waits on nothing: each request claims on its own (a millisecond's wait).
    const single = key !== undefined && cfg.concurrent === 'wait';
    return this.answer(await (single ? this.inTurn(job) : this.engine.run(job)));
  }

  /**
   * Runs a keyed request in its key's single flight (see KeyFlights): behind the one
   * request of its key this process has at the database, answered from the row that one
   * committed or found, or claiming in its turn with what is left of `lockTimeoutMs`.
   */
  private async inTurn(job: Job<Tx>): Promise<Verdict> {
    const { claim } = job;
    const waitMs = job.waitMs ?? this.cfg.lockTimeoutMs;
    const turn = await this.flights.enter(claim.scope, claim.key, waitMs);
    switch (turn.kind) {
      case 'stored':
        return this.engine.replay(claim, turn.record, job.contextOnly === true);
      case 'timeout':
        return {
          kind: 'failed',
          error: new ClaimBusyError(claim.key, waitMs),
          infrastructure: true,
          conflict: false,
        };
      case 'stopped':
        return { kind: 'released', error: new ShutdownError(claim.key) };
      case 'claim': {
        let verdict: Verdict | undefined;
        try {
          verdict = await this.engine.run({
            ...job,
            waitMs: Math.max(1, Math.floor(waitMs - turn.waitedMs)),
          });
          return verdict;
        } finally {
          turn.done(verdict === undefined ? undefined : committedRow(verdict));
        }
      }
    }
  }

  private answer(verdict: Verdict): Execution {
    switch (verdict.kind) {
      case 'executed':
        this.counters.executed++;
        if (this.hub.listens('executed'))
          this.hub.emit('executed', { status: verdict.response.status });
        return {
          kind: 'response',
          response: verdict.response,
          outcome: 'executed',
          streaming: verdict.streaming,
        };
      case 'replayed':
        this.counters.replayed++;
        if (this.hub.listens('replayed'))
          this.hub.emit('replayed', { status: verdict.response.status });
        return {
          kind: 'response',
          response: verdict.response,
          outcome: 'replayed',
          streaming: false,
        };
      case 'rolled-back':
        this.counters.rolledBack++;
        if (this.hub.listens('rolled-back'))
          this.hub.emit('rolled-back', { status: verdict.response.status });
        // The handler's own response, its body unread: it may be anything.
        return {
          kind: 'response',
          response: verdict.response,
          outcome: 'rolled-back',
          streaming: true,
        };
      case 'threw':
        // A database refusing the handler's statements (a read-only node's 25006) is
        // no bug of the handler's: 503 + Retry-After, as when the claim meets it.
        if (databaseUnavailable(verdict.error))
          return this.problem(new DatabaseError('handler statement', verdict.error), 'failed');
        return this.threw(verdict.error);
      case 'refused':
        return this.problem(verdict.error, 'refused');
      case 'failed':
      case 'released':
        return this.problem(verdict.error, 'failed');
    }
  }

  /**
   * `work` (a user hook before the claim, the body's read, the migration), unless the
   * hard stop comes first: then it rejects with the stop's reason, and whatever `work`
   * does later is ignored. Nothing was claimed yet, so nothing is left to undo, and
   * close() must not wait on the user's code or the client past its deadline.
   */
  private untilHardStop<T>(work: T | PromiseLike<T>): Promise<T> {
    return untilAborted(work, this.hardStop.signal);
  }

  /** The answer to a request the hard stop ended before its claim: 503, nothing applied. */
  private stopped(error: unknown): Execution | undefined {
    const stop = this.hardStop.signal;
    if (!stop.aborted || error !== stop.reason) return undefined;
    return this.problem(error as ShutdownError, 'failed');
  }

  private problem(error: EffectivelyOnceError, outcome: 'refused' | 'failed'): Execution {
    const response = problemResponse(error, this.cfg);
    const status = response.status;
    if (status === 409) {
      this.counters.busy++;
      this.hub.emit('busy', { status, error });
    } else if (error.code === 'EO_IDEMPOTENCY_KEY_REUSED') {
      this.counters.mismatched++;
      this.hub.emit('mismatch', { status, error });
    } else {
      this.counters.failed++;
      this.hub.emit('failed', { status, error });
    }
    if (response.status >= 500)
      this.cfg.logger.warn({ err: error }, 'effectively-once: request not applied');
    return { kind: 'response', response, outcome, streaming: false };
  }

  private threw(error: unknown): Execution {
    this.counters.failed++;
    this.hub.emit('failed', { status: 500, error });
    this.cfg.logger.error({ err: error }, 'effectively-once: handler failed, rolled back');
    return { kind: 'threw', error, response: handlerFailedResponse(this.cfg), streaming: false };
  }

  /**
   * Migrates `database` once (again after a failure) and checks its standby, then starts
   * pruning: each database on its own, so one that is down fails only its own keys.
   */
  private prepare(database: string): Promise<void> {
    let ready = this.ready.get(database);
    if (ready !== undefined) return ready;
    const db = this.databases.find((d) => d.name === database)!;
    ready = (async () => {
      if (this.cfg.migrate) await migrateKeyTable(db.pool, this.cfg.table);
      else
        await checkMigratedAtStart(db.pool, idempotencyKeyTables, this.cfg.table, {
          timeoutMs: this.cfg.acquireTimeoutMs,
          logger: this.cfg.logger,
        });
      // Refused (every request answered 500) while the standby cannot be seen.
      await db.replica?.check();
      this.pruner?.start();
    })().catch((error: unknown) => {
      this.ready.delete(database);
      throw error;
    });
    this.ready.set(database, ready);
    return ready;
  }
}

/**
 * Where the endpoint's claim transactions come from: the library's own pool, or the
 * user's data layer (`dataLayer`), whose transaction the handler gets as `ctx.tx`.
 */
function claimTransactions<Tx>(
  cfg: IdempotencyConfig<Tx>,
  deps: ConnectionDeps,
): ClaimTransactions<Tx> {
  const layer = cfg.dataLayer;
  // No data layer: `Tx` is PoolClient (createIdempotency's default), the guarded client.
  if (layer === undefined) return pgClaimTransactions(deps) as unknown as ClaimTransactions<Tx>;
  return layerClaimTransactions(layer, {
    ...deps,
    isolationLevel: cfg.isolationLevel,
    timeoutMs: layerTimeoutMs(cfg),
  });
}

/**
 * Room the layer's own transaction limit (Prisma's interactive `timeout`) leaves beyond
 * the handler's: the library's statements after it (the stored response, the xid
 * check) and the COMMIT with its deferred checks. Generous on purpose: a layer limit
 * that fires first would roll back work the door still means to commit.
 */
const LAYER_TIMEOUT_MARGIN_MS = 30_000;

/**
 * The longest a request's work runs inside the layer's transaction: the claim's wait on
 * a key another request holds, the handler with its body read (`handlerTimeoutMs`), and
 * the margin; 0 (no limit) when the handler has none.
 */
function layerTimeoutMs(cfg: IdempotencyConfig<unknown>): number {
  if (cfg.handlerTimeoutMs === 0) return 0;
  return cfg.lockTimeoutMs + cfg.handlerTimeoutMs + LAYER_TIMEOUT_MARGIN_MS;
}
