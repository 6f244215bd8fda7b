import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { ClientConfig } from 'pg';
import { retryDelay } from '../backoff.js';
import { DatabaseError, EffectivelyOnceError, StateError } from '../errors.js';
import { Doorbell } from './doorbell.js';
import { ListenThroughPoolerError } from './errors.js';
import { outboxChannel } from './enqueue.js';
import { RelayEventHub } from './events.js';
import { NotifyListener } from './listener.js';
import { outboxStats } from './stats.js';
import { publishStep } from './publish.js';
import { replicaGuard, type ReplicaGuard } from '../replica/guard.js';
import { resolveRelayOptions, type RelayOptions } from './relay-options.js';
import type { Relay, RelayStats } from './relay-types.js';
import { settleBatch, type SettleContext } from './settle.js';
import { RelayStatements, type ClaimedBatch } from './statements.js';
import { pruneOutbox } from './table.js';

/**
 * Creates a relay that publishes committed outbox rows: it claims due rows in small
 * batches with `FOR UPDATE SKIP LOCKED` under a lease with a fencing token, hands each
 * destination's rows to its publisher, and marks them published (or failed, with
 * backoff, then parked). Wakes on `enqueue`'s NOTIFY, polls as a fallback. Any number
 * of relays may run against one table, in one process or many.
 *
 * At-least-once: a relay that dies between a publish and its mark leaves the row to be
 * published again after the lease; the row id travels as the dedup key, so the
 * receiver applies it once.
 */
export function createRelay(options: RelayOptions): Relay {
  const config = resolveRelayOptions(options);
  const ref = config.table;
  const statements = new RelayStatements(options.pool, ref);
  const logger = config.logger;
  const hub = new RelayEventHub(logger);
  let replica: ReplicaGuard | undefined;
  const owner = options.owner ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const counters: RelayStats = { published: 0, failed: 0, parked: 0, fenced: 0, batches: 0 };
  const telemetry = config.telemetry;
  const destinations = Object.keys(options.publishers).sort();
  const settling: SettleContext = {
    publish: publishStep({
      publishers: new Map(Object.entries(options.publishers)),
      publishTimeoutMs: config.publishTimeoutMs,
      telemetry,
      logger,
    }),
    statements,
    hub,
    counters,
    maxAttempts: config.maxAttempts,
    backoff: config.backoff,
  };

  let state: 'new' | 'running' | 'stopping' | 'stopped' = 'new';
  let loop: Promise<void> | undefined;
  let listener: NotifyListener | undefined;
  const timers: NodeJS.Timeout[] = [];
  const doorbell = new Doorbell();
  const wake = (): void => doorbell.ring();
  const nap = (ms: number): Promise<void> => doorbell.nap(ms, state !== 'running');

  const fail = (error: unknown, operation: string): void => {
    hub.emit(
      'error',
      error instanceof EffectivelyOnceError ? error : new DatabaseError(operation, error),
    );
  };

  async function run(): Promise<void> {
    let failures = 0;
    while (state === 'running') {
      let batch: ClaimedBatch | undefined;
      try {
        // replicaSafe: published only once the standby has the rows read (their commits
        // came before the claim's read, the wait's poll after it); unconfirmed, the rows
        // stay leased and are published after the lease (or by the new primary's relays).
        const ticket = replica?.begin();
        batch = await statements.claim(owner, destinations, config.batchSize, config.leaseMs);
        const held = batch === undefined ? undefined : await replica?.confirm(ticket, 'outbox');
        if (held !== undefined) throw held;
        if (batch !== undefined) await settleBatch(batch, settling);
        failures = 0;
      } catch (error) {
        // The database is unreachable (or a mark failed: those rows are published again
        // once their lease runs out, deduplicated downstream). Back off, then retry.
        fail(error, 'outbox relay');
        failures++;
        await nap(retryDelay(failures, { initialMs: 100, maxMs: 5000 }));
        continue;
      }
      // A settled batch may have made the next rows of its keys due: look again at once.
      if (batch === undefined) await nap(config.pollIntervalMs);
    }
  }

  /** start()'s work: the LISTEN connection, then (unless stop() came meanwhile) the rest. */
  async function begin(): Promise<void> {
    replica = replicaGuard(options.pool, config.replicaSafe, logger);
    if (replica !== undefined) {
      replica.onReport((report) => hub.emit('replica', report));
      try {
        // Refused at start: the standby it is to wait for cannot be seen.
        await replica.check();
      } catch (error) {
        replica.close();
        replica = undefined;
        state = 'stopped';
        throw error;
      }
    }
    const listen = options.listen ?? true;
    if (listen !== false) {
      const clientConfig: ClientConfig = listen === true ? { ...options.pool.options } : listen;
      let pooled: { keyPid: number; backendPid: number } | undefined;
      let listening = false;
      listener = new NotifyListener(clientConfig, outboxChannel(ref), {
        wake,
        lost: (error) => fail(new DatabaseError('outbox LISTEN connection', error), 'listen'),
        pooled: (pids) => {
          pooled = pids;
          // Only the pool's settings: a connection asked for by name is refused below.
          if (listen === true || listening)
            logger.warn(
              { ...pids, schema: ref.schema, table: ref.table },
              `effectively-once: the outbox relay's LISTEN connection goes through a connection pooler, ` +
                `which delivers no notifications in transaction mode: not listening, polling every ` +
                `${config.pollIntervalMs} ms (give \`listen\` a direct connection to Postgres to be woken by NOTIFY)`,
            );
        },
      });
      await listener.start();
      listening = true;
      // Asked for LISTEN on that connection, which cannot deliver: refused, not degraded.
      if (pooled !== undefined && listen !== true) {
        state = 'stopped';
        throw new ListenThroughPoolerError(pooled);
      }
    }
    if (state !== 'running') return;
    const retention = config.retention;
    if (retention !== undefined) {
      const prune = (): void =>
        void pruneOutbox(options.pool, {
          ...ref,
          olderThan: retention.olderThanMs,
          batchSize: retention.batchSize,
          dutyCycle: retention.dutyCycle,
        }).catch((error: unknown) => fail(error, 'outbox retention'));
      timers.push(setInterval(prune, retention.intervalMs));
    }
    timers.push(
      setInterval(() => {
        if (!hub.listens('lag')) return;
        outboxStats(options.pool, ref).then(
          (stats) => hub.emit('lag', stats),
          (error: unknown) => fail(error, 'outbox stats'),
        );
      }, config.lagIntervalMs),
    );
    for (const timer of timers) timer.unref();
    loop = run();
    logger.info(
      { owner, destinations, schema: ref.schema, table: ref.table },
      `effectively-once: outbox relay started, publishing ${destinations.join(', ') || 'nothing'}`,
    );
  }

  let starting: Promise<void> | undefined;
  let stopping: Promise<void> | undefined;
  const relay: Relay = {
    owner,
    destinations,
    async start() {
      if (state !== 'new') throw new StateError(`relay.start() called while ${state}`);
      state = 'running';
      starting = begin();
      await starting;
    },
    stop() {
      if (state === 'new' || state === 'stopped') return Promise.resolve();
      stopping ??= (async () => {
        state = 'stopping';
        // A start() still connecting finishes first (and then starts nothing more), so
        // what it opened is closed below.
        await starting?.catch(() => undefined);
        for (const timer of timers) clearInterval(timer);
        doorbell.interrupt();
        await loop;
        await listener?.close();
        replica?.close();
        state = 'stopped';
      })();
      return stopping;
    },
    wake,
    on(event, fn) {
      hub.on(event, fn);
      return relay;
    },
    off(event, fn) {
      hub.off(event, fn);
      return relay;
    },
    stats: () => ({
      ...counters,
      ...(replica !== undefined ? { replica: replica.status() } : {}),
    }),
    outboxStats: (filter = {}) =>
      outboxStats(options.pool, { ...ref, destination: filter.destination }),
  };
  try {
    telemetry?.attach?.(relay);
  } catch (err) {
    logger.warn({ err }, 'effectively-once: relay telemetry attach threw');
  }
  return relay;
}
