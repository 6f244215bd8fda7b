import { setMaxListeners } from 'node:events';
import { resolveConfig, type ConsumerConfig } from './config.js';
import { DatabaseHealth } from './db-health.js';
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
import type { PoolClient } from 'pg';
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
  private readonly health: DatabaseHealth;
  /** `replicaSafe`: what holds each ack until the standby has the commit. */
  private readonly replica: ReplicaGuard | undefined;
  private readonly retention: RetentionPruner | undefined;
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
    this.health = new DatabaseHealth(cfg.pool, cfg.logger, this.receiveAbort.signal);
    const tracing = new Tracing(cfg.telemetry, cfg.name);
    const settler = new Settler(cfg, this.hub, this.counters, this.lifecycle, tracing);
    this.replica = replicaGuard(cfg.pool, cfg.replicaSafe, cfg.logger);
    this.replica?.onReport((report) => this.hub.emit('replica', report));
    const connections = withReplica(
      claimTransactions(cfg, {
        pool: cfg.pool,
        health: this.health,
        logger: cfg.logger,
        acquireTimeoutMs: cfg.acquireTimeoutMs,
        hardStop: this.hardStop.signal,
      }),
      this.replica,
    );
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
    this.retention =
      cfg.retention &&
      consumerRetention(cfg.pool, cfg.name, cfg.table, cfg.retention, this.hub, this.counters);
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
      // The hard stop (stop()'s deadline) cancels a migration still waiting on a lock.
      if (this.cfg.migrate)
        await applyMigrations(this.cfg.pool, dedupTables, this.cfg.table, this.hardStop.signal);
      else
        await checkMigratedAtStart(this.cfg.pool, dedupTables, this.cfg.table, {
          timeoutMs: this.cfg.acquireTimeoutMs,
          logger: this.cfg.logger,
        });
      // Refused at start: the standby it is to wait for cannot be seen.
      await this.replica?.check();
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
    this.retention?.start();
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
    await this.retention?.stop(deadline.signal);
    this.replica?.close();
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
      ...(this.replica !== undefined ? { replica: this.replica.status() } : {}),
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
  const max = (cfg.pool as { options?: { max?: unknown } }).options?.max;
  const size = typeof max === 'number' ? max : 10; // pg's default
  if (size >= cfg.concurrency + 1) return;
  cfg.logger.warn(
    { consumer: cfg.name, poolMax: size, concurrency: cfg.concurrency },
    `effectively-once: the pool has ${size} connections for concurrency ${cfg.concurrency}; give it at least ${cfg.concurrency + 1} (more if handlers use the pool), or lower concurrency`,
  );
}
