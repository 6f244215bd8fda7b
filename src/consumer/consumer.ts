import { setMaxListeners } from 'node:events';
import { resolveConfig, type ConsumerConfig } from './config.js';
import { AnyHealthy, DatabaseHealth } from './db-health.js';
import { Router } from '../routing/router.js';
import { routedTransactions } from '../tx/routed.js';
import { replicaGuard, type ReplicaGuard } from '../replica/guard.js';
import { Dispatcher } from './dispatcher.js';
import { settlesBefore } from '../deadline.js';
import { BrokerError, EffectivelyOnceError, StateError } from '../errors.js';
import { ConsumerEventHub, type Listener } from './events.js';
import type { ConsumerOptions } from './options.js';
import type { RetentionPruner } from '../retention.js';
import { consumerRetention } from './retention.js';
import { Batcher } from './batcher.js';
import { BatchRunner } from './batch-runner.js';
import type { Lifecycle } from './lifecycle.js';
import { Runner } from './runner.js';
import { Settler } from './settle.js';
import { emptyStats } from './stats.js';
import { Tracing } from './tracing.js';
import { dedupTables } from '../store/migrate.js';
import { applyMigrations, checkMigratedAtStart } from '../store/migrator.js';
import { type ConnectionDeps, pgClaimTransactions } from '../tx/claim-connection.js';
import { type ClaimTransactions, withReplica } from '../tx/claim-transaction.js';
import { layerClaimTransactions, layerTimeoutMs } from '../tx/layer-transaction.js';
import type { Pool, PoolClient } from 'pg';
import type { ConsumerEventName, ConsumerStats, SourceContext } from '../types.js';
import type { Consumer, StopOptions } from './types.js';

/**
 * Creates a consumer that gives `handler` an exactly-once effect: each delivery's key
 * is claimed in `processed_messages` inside the transaction the handler writes with,
 * and the broker is acked only after COMMIT. Options are validated here and a
 * {@link ConfigurationError} names the first bad one.
 */
export function createConsumer<T, Tx = PoolClient>(options: ConsumerOptions<T, Tx>): Consumer {
  return new ConsumerImpl(resolveConfig(options));
}

class ConsumerImpl<T, Tx> implements Consumer {
  private readonly hub: ConsumerEventHub;
  private readonly counters = emptyStats();
  private readonly receiveAbort = new AbortController();
  private readonly hardStop = new AbortController();
  private readonly lifecycle: Lifecycle;
  private readonly dispatcher: Dispatcher<T> | Batcher<T>;
  /** Paused only while every database is down. */
  private readonly health: AnyHealthy;
  /** The consumer's databases (one without routing), each with what runs per database. */
  private readonly databases: ReadonlyArray<{
    name: string;
    pool: Pool;
    health: DatabaseHealth;
    /** `replicaSafe`: what holds each ack until this database's standby has the commit. */
    replica: ReplicaGuard | undefined;
    transactions: ClaimTransactions<Tx>;
    retention: RetentionPruner | undefined;
  }>;
  /** Set when each delivery is followed on its own (batch mode follows batches instead). */
  private readonly tracing: Tracing | undefined;
  private state: 'new' | 'starting' | 'running' | 'stopping' | 'stopped' = 'new';
  private runPromise: Promise<void> | undefined;
  private starting: Promise<void> | undefined;
  private stopPromise: Promise<void> | undefined;
  private resolveDone!: () => void;
  readonly done: Promise<void>;

  constructor(private readonly cfg: ConsumerConfig<T, Tx>) {
    this.hub = new ConsumerEventHub(cfg.logger);
    this.lifecycle = { stopping: false, hardStop: this.hardStop.signal };
    // Every delivery waiting for a pool connection listens for the hard stop: many at
    // once is expected, not a leak.
    setMaxListeners(Infinity, this.hardStop.signal);
    const tracing = new Tracing(cfg.telemetry, cfg.name);
    const settler = new Settler(cfg, this.hub, this.counters, this.lifecycle, tracing);
    // Each database (one without routing) has its own health probe, replica guard, claim
    // transactions and pruning; the driver picks the key's database per transaction.
    this.databases = cfg.databases.map((db) => {
      const named = cfg.routing === undefined ? undefined : db.name;
      const health = new DatabaseHealth(db.pool, cfg.logger, this.receiveAbort.signal, named);
      const replica = replicaGuard(db.pool, cfg.replicaSafe, cfg.logger);
      replica?.onReport((report) => this.hub.emit('replica', report));
      const transactions = withReplica(
        claimTransactions(
          { ...cfg, dataLayer: db.dataLayer as ConsumerConfig<T, Tx>['dataLayer'] },
          {
            pool: db.pool,
            health,
            logger: cfg.logger,
            acquireTimeoutMs: cfg.acquireTimeoutMs,
            hardStop: this.hardStop.signal,
          },
        ),
        replica,
      );
      const retention =
        cfg.retention &&
        consumerRetention(db.pool, cfg.name, cfg.table, cfg.retention, this.hub, this.counters);
      return { name: db.name, pool: db.pool, health, replica, transactions, retention };
    });
    this.health = new AnyHealthy(this.databases.map((d) => d.health));
    const connections = routedTransactions(this.databases, cfg.routing && new Router(cfg.routing));
    if (cfg.batch) {
      const runner = new BatchRunner(cfg, settler, connections, this.lifecycle);
      this.dispatcher = new Batcher(
        cfg.concurrency,
        cfg.batch.maxSize,
        cfg.batch.maxWaitMs,
        (ds, held, hold) => runner.process(ds, held, hold),
      );
    } else {
      const runner = new Runner(cfg, settler, connections, this.lifecycle);
      // Twice the concurrency in flight: while one delivery's ack travels, another can run.
      this.dispatcher = new Dispatcher(
        cfg.concurrency,
        cfg.concurrency * 2,
        (d) => runner.process(d),
        (d) => settler.holdBack(d),
      );
    }
    this.tracing = cfg.batch ? undefined : tracing;
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    warnIfPoolTooSmall(cfg);
    cfg.telemetry?.attach?.(this, cfg.name);
  }

  async start(): Promise<void> {
    if (this.state !== 'new')
      throw new StateError(`Consumer "${this.cfg.name}" was already started`);
    this.state = 'starting';
    this.starting = this.begin();
    try {
      await this.starting;
    } finally {
      this.starting = undefined;
    }
  }

  private async begin(): Promise<void> {
    try {
      // Every database's tables, in turn: a consumer starts only when each is ready.
      for (const db of this.databases) {
        // The hard stop (stop()'s deadline) cancels a migration still waiting on a lock.
        if (this.cfg.migrate)
          await applyMigrations(db.pool, dedupTables, this.cfg.table, this.hardStop.signal);
        else
          await checkMigratedAtStart(db.pool, dedupTables, this.cfg.table, {
            timeoutMs: this.cfg.acquireTimeoutMs,
            logger: this.cfg.logger,
          });
        // Refused at start: the standby it is to wait for cannot be seen.
        await db.replica?.check();
      }
    } catch (error) {
      // A failed start leaves nothing running: the caller may start() again later.
      if (this.state === 'starting') this.state = 'new';
      if (this.hardStop.signal.aborted)
        throw new StateError(
          `Consumer "${this.cfg.name}" was stopped while start() was still migrating; nothing was consumed`,
          { consumer: this.cfg.name },
        );
      throw error;
    }
    // stop() came while migrating: the source must never run.
    if (this.state !== 'starting') return;
    const ctx: SourceContext<T> = {
      signal: this.receiveAbort.signal,
      hardStop: this.hardStop.signal,
      logger: this.cfg.logger,
      deliver: (delivery) =>
        this.tracing === undefined
          ? this.dispatcher.dispatch(delivery)
          : this.tracing.delivery(delivery, () => this.dispatcher.dispatch(delivery)),
      freeCapacity: () => (this.health.healthy ? this.dispatcher.freeCapacity() : 0),
      waitForCapacity: async () => {
        await this.health.whenHealthy();
        await this.dispatcher.waitForCapacity(this.receiveAbort.signal);
      },
      reportError: (error) => this.hub.emit('error', error),
    };
    this.runPromise = this.cfg.source.run(ctx).catch((cause: unknown) => {
      this.hub.emit(
        'error',
        cause instanceof EffectivelyOnceError
          ? cause
          : new BrokerError('receive loop', cause, { retryable: false }),
      );
    });
    void this.runPromise.then(() => this.resolveDone());
    for (const db of this.databases) db.retention?.start();
    this.state = 'running';
    this.cfg.logger.info(
      { consumer: this.cfg.name, source: this.cfg.source.description },
      'effectively-once: consumer started',
    );
  }

  stop(options: StopOptions = {}): Promise<void> {
    this.stopPromise ??= this.shutdown(options.timeoutMs ?? 30_000);
    return this.stopPromise;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    if (this.state === 'new') {
      this.state = 'stopped';
      this.resolveDone();
      return;
    }
    this.state = 'stopping';
    this.lifecycle.stopping = true;
    this.receiveAbort.abort();
    // The deadline also bounds the source's close: a broker client still joining a group
    // (or disconnecting from one) must not hold stop() past it. It starts before waiting
    // for a start() still migrating, which may wait on a lock for as long as another
    // transaction stays open: at the deadline the hard stop cancels that migration.
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), timeoutMs);
    // A start() still migrating sees the state and never runs the source.
    if (this.starting && !(await settlesBefore(this.starting, deadline.signal)))
      this.hardStop.abort();
    await this.starting?.catch(() => undefined);
    const grace = new Promise<'timeout'>((resolve) =>
      deadline.signal.addEventListener('abort', () => resolve('timeout'), { once: true }),
    );
    const drained = Promise.all([this.runPromise, this.dispatcher.idle()]).then(
      () => 'drained' as const,
    );
    if ((await Promise.race([drained, grace])) === 'timeout') this.hardStop.abort();
    // Past the hard stop the runners give up on what still runs, and every settlement in
    // flight then is given up on too (see Settler): nothing holds `drained` for long.
    await drained;
    // Both may wait on a pool still held by a handler given up on: bounded by the deadline.
    await settlesBefore(this.health.close(), deadline.signal);
    for (const db of this.databases) {
      await db.retention?.stop(deadline.signal);
      db.replica?.close();
    }
    const closing = this.cfg.source.close({ signal: deadline.signal }).catch((cause: unknown) => {
      this.hub.emit(
        'error',
        cause instanceof EffectivelyOnceError ? cause : new BrokerError('close', cause),
      );
    });
    if (!(await settlesBefore(closing, deadline.signal)))
      this.cfg.logger.warn(
        { consumer: this.cfg.name, source: this.cfg.source.description, timeoutMs },
        'effectively-once: the source was still closing at the stop deadline; it goes on in the background',
      );
    clearTimeout(timer);
    this.state = 'stopped';
    this.resolveDone();
    this.cfg.logger.info(
      { consumer: this.cfg.name, stats: this.stats() },
      'effectively-once: consumer stopped',
    );
  }

  on<E extends ConsumerEventName>(event: E, listener: Listener<E>): Consumer {
    this.hub.on(event, listener);
    return this;
  }

  off<E extends ConsumerEventName>(event: E, listener: Listener<E>): Consumer {
    this.hub.off(event, listener);
    return this;
  }

  stats(): ConsumerStats {
    return {
      ...this.counters,
      inFlight: this.dispatcher.pending,
      // Routing: the first database's standby (a status per database is not reported yet).
      ...(this.databases[0]?.replica !== undefined
        ? { replica: this.databases[0].replica.status() }
        : {}),
    };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/**
 * Where the consumer's claim transactions come from: the data layer's, or the library's
 * own on `pool`.
 */
function claimTransactions<T, Tx>(
  cfg: ConsumerConfig<T, Tx>,
  deps: ConnectionDeps,
): ClaimTransactions<Tx> {
  if (cfg.dataLayer !== undefined)
    return layerClaimTransactions(cfg.dataLayer, {
      ...deps,
      isolationLevel: cfg.isolationLevel,
      timeoutMs: layerTimeoutMs(cfg.handlerTimeoutMs, cfg.lockTimeoutMs),
    });
  // Without a data layer nothing can type `Tx` but ConsumerOptions' default, PoolClient:
  // a handler typed for anything else does not compile without a `dataLayer` of it.
  const own: ClaimTransactions<unknown> = pgClaimTransactions(deps);
  return own as ClaimTransactions<Tx>;
}

/**
 * Each delivery holds a pool connection while it runs, and a handler that also uses the
 * pool (or the retention pruner, the health probe) needs one more: a pool of
 * `concurrency` connections or fewer can leave one waiting for a connection no one frees.
 */
function warnIfPoolTooSmall<T, Tx>(cfg: ConsumerConfig<T, Tx>): void {
  for (const db of cfg.databases) warnIfTooSmall(cfg, db.pool, db.name);
}

function warnIfTooSmall<T, Tx>(cfg: ConsumerConfig<T, Tx>, pool: Pool, database: string): void {
  const max = (pool as { options?: { max?: unknown } }).options?.max;
  const size = typeof max === 'number' ? max : 10; // pg's default
  if (size >= cfg.concurrency + 1) return;
  cfg.logger.warn(
    { consumer: cfg.name, database, poolMax: size, concurrency: cfg.concurrency },
    `effectively-once: the pool has ${size} connections for concurrency ${cfg.concurrency}; give it at least ${cfg.concurrency + 1} (more if handlers use the pool), or lower concurrency`,
  );
}
