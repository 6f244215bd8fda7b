import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Pool, ClientConfig } from 'pg';
import { retryDelay } from '../backoff.js';
import {
  ConfigurationError,
  DatabaseError,
  EffectivelyOnceError,
  StateError,
  describe,
} from '../errors.js';
import { silentLogger } from '../events.js';
import { intOption } from '../option-checks.js';
import type { Logger } from '../types.js';
import { outboxChannel } from './enqueue.js';
import { PublishError } from './errors.js';
import { RelayEventHub, type RelayEventName, type RelayEvents } from './events.js';
import { NotifyListener } from './listener.js';
import { outboxStats, type OutboxStats } from './parked.js';
import type { OutboxRecord, Publisher } from './record.js';
import { RelayStatements, type ClaimedBatch, type Failure } from './statements.js';
import { outboxRef, pruneOutbox, type OutboxTableOptions } from './table.js';
import type { RelayPublishScope, RelayTelemetry } from './telemetry.js';

/** Options of {@link createRelay}. */
export interface RelayOptions extends OutboxTableOptions {
  /** The pool the outbox table is in; the relay's claims and marks use it. */
  pool: Pool;
  /** The publisher of each destination (the `destination` given to `enqueue`). */
  publishers: Readonly<Record<string, Publisher>>;
  /** Rows claimed at once, 1 to 1000. Default 20. */
  batchSize?: number;
  /**
   * How long a claim keeps other relays off its rows, in ms (1 000 to 3 600 000). A
   * relay that dies holding rows delays them this long; one that is merely slow past
   * it loses them to another relay (and its marks are refused). Default 30 000.
   */
  leaseMs?: number;
  /**
   * Longest wait for one publisher call, in ms; then its rows count as failed. At most
   * half of `leaseMs` (the default), so a batch is settled before its lease runs out.
   */
  publishTimeoutMs?: number;
  /**
   * How often the relay looks for due rows without a notification, in ms (10 to
   * 86 400 000): catches rows whose backoff ended and rows committed while the LISTEN
   * connection was down. Default 1 000.
   */
  pollIntervalMs?: number;
  /** Attempts before a row is parked, 1 to 1000. Default 10. */
  maxAttempts?: number;
  /** Retry backoff per row (equal jitter, doubling). Default `{ initialMs: 1000, maxMs: 300_000 }`. */
  backoff?: { initialMs?: number; maxMs?: number };
  /**
   * LISTEN for `enqueue`'s notifications on a dedicated connection: `true` (default)
   * connects with the pool's settings, a `ClientConfig` with those, `false` polls only.
   */
  listen?: boolean | ClientConfig;
  /** Delete published rows older than `publishedMs`, every `intervalMs` (default 60 000). */
  retention?: { publishedMs: number; intervalMs?: number };
  /** How often the `lag` event fires while it has a listener, in ms. Default 10 000. */
  lagIntervalMs?: number;
  /** Names this relay in `lease_owner`. Default `host:pid:random`. */
  owner?: string;
  /** Where unhandled errors go. Default: nowhere. */
  logger?: Logger;
  /**
   * Tracing and metrics hooks: `otelRelayTelemetry()` from `effectively-once/otel`
   * gives each published row a producer span and counts the relay's outcomes.
   */
  telemetry?: RelayTelemetry;
}

/** Counters of one relay since it was created; monotonic. */
export interface RelayMetrics {
  /** Rows marked published. */
  published: number;
  /** Failed publish attempts (retried or parked). */
  failed: number;
  /** Rows parked. */
  parked: number;
  /** Marks refused because another relay had taken the row over. */
  fenced: number;
  /** Batches claimed and settled. */
  batches: number;
}

/** A running (or startable) relay. */
export interface Relay {
  /** This relay's `lease_owner`. */
  readonly owner: string;
  /** Starts LISTENing and relaying. Rejects if already started. */
  start(): Promise<void>;
  /**
   * Stops claiming, waits for the batch in flight to be published and marked (at most
   * `publishTimeoutMs` plus the marks), then closes the LISTEN connection. Nothing is
   * left leased by a relay that stopped this way.
   */
  stop(): Promise<void>;
  /** Looks for due rows now, as a notification would. */
  wake(): void;
  /** Subscribes to an event. */
  on<E extends RelayEventName>(event: E, listener: (payload: RelayEvents[E]) => void): void;
  /** Unsubscribes. */
  off<E extends RelayEventName>(event: E, listener: (payload: RelayEvents[E]) => void): void;
  /** This relay's counters. */
  metrics(): RelayMetrics;
  /** The table's pending and parked counts and its lag (a query). */
  stats(): Promise<OutboxStats>;
}

interface Resolved {
  batchSize: number;
  leaseMs: number;
  publishTimeoutMs: number;
  pollIntervalMs: number;
  maxAttempts: number;
  backoff: { initialMs: number; maxMs: number };
  lagIntervalMs: number;
}

function resolve(options: RelayOptions): Resolved {
  if (options.pool === undefined || options.pool === null)
    throw new ConfigurationError('pool', 'is required');
  if (options.publishers === null || typeof options.publishers !== 'object')
    throw new ConfigurationError('publishers', 'must map each destination to a publisher');
  if (
    options.telemetry !== undefined &&
    typeof (options.telemetry as Partial<RelayTelemetry> | null)?.startPublish !== 'function'
  )
    throw new ConfigurationError('telemetry', 'must have a startPublish function');
  for (const [destination, publisher] of Object.entries(options.publishers)) {
    if (typeof (publisher as Partial<Publisher> | undefined)?.publish !== 'function')
      throw new ConfigurationError('publishers', `"${destination}" has no publish function`);
  }
  const retention = options.retention;
  if (
    retention !== undefined &&
    !(
      typeof retention?.publishedMs === 'number' &&
      Number.isFinite(retention.publishedMs) &&
      retention.publishedMs >= 0
    )
  )
    throw new ConfigurationError('retention.publishedMs', 'must be a number of ms >= 0');
  const leaseMs = intOption('leaseMs', options.leaseMs, 30_000, 1000, 3_600_000);
  const initialMs = intOption('backoff.initialMs', options.backoff?.initialMs, 1000, 0, 86_400_000);
  return {
    batchSize: intOption('batchSize', options.batchSize, 20, 1, 1000),
    leaseMs,
    publishTimeoutMs: intOption(
      'publishTimeoutMs',
      options.publishTimeoutMs,
      Math.floor(leaseMs / 2),
      1,
      Math.floor(leaseMs / 2),
    ),
    pollIntervalMs: intOption('pollIntervalMs', options.pollIntervalMs, 1000, 10, 86_400_000),
    maxAttempts: intOption('maxAttempts', options.maxAttempts, 10, 1, 1000),
    backoff: {
      initialMs,
      maxMs: intOption(
        'backoff.maxMs',
        options.backoff?.maxMs,
        Math.max(300_000, initialMs),
        initialMs,
        86_400_000,
      ),
    },
    lagIntervalMs: intOption('lagIntervalMs', options.lagIntervalMs, 10_000, 100, 86_400_000),
  };
}

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
  const config = resolve(options);
  const ref = outboxRef(options);
  const statements = new RelayStatements(options.pool, ref);
  const hub = new RelayEventHub(options.logger ?? silentLogger);
  const owner = options.owner ?? `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const publishers = new Map(Object.entries(options.publishers));
  const counters: RelayMetrics = { published: 0, failed: 0, parked: 0, fenced: 0, batches: 0 };
  const logger = options.logger ?? silentLogger;
  const telemetry = options.telemetry;

  let state: 'new' | 'running' | 'stopping' | 'stopped' = 'new';
  let loop: Promise<void> | undefined;
  let listener: NotifyListener | undefined;
  const timers: NodeJS.Timeout[] = [];

  // The doorbell: a NOTIFY (or wake()) while the loop is busy is remembered, so the
  // loop looks again at once instead of sleeping through it.
  let rung = false;
  let ring: (() => void) | undefined;
  const wake = (): void => {
    rung = true;
    ring?.();
  };
  const nap = (ms: number): Promise<void> => {
    if (rung || state !== 'running') {
      rung = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        ring = undefined;
        rung = false;
        resolve();
      }
      ring = done;
    });
  };

  const fail = (error: unknown, operation: string): void => {
    hub.emit(
      'error',
      error instanceof EffectivelyOnceError ? error : new DatabaseError(operation, error),
    );
  };

  /** Telemetry's view of one publisher call; a throwing hook must not stop publishing. */
  function observePublish(
    destination: string,
    records: OutboxRecord[],
  ): { records: readonly OutboxRecord[]; end(failures: ReadonlyMap<string, unknown>): void } {
    if (telemetry === undefined) return { records, end: () => undefined };
    let scope: RelayPublishScope;
    try {
      scope = telemetry.startPublish(destination, records);
    } catch (err) {
      logger.warn({ err }, 'effectively-once: relay telemetry startPublish threw');
      return { records, end: () => undefined };
    }
    return {
      records: scope.records.length === records.length ? scope.records : records,
      end: (failures) => {
        try {
          scope.end(failures);
        } catch (err) {
          logger.warn({ err }, 'effectively-once: relay telemetry end threw');
        }
      },
    };
  }

  async function publishGroup(
    destination: string,
    claimed: OutboxRecord[],
  ): Promise<Map<string, unknown>> {
    const observed = observePublish(destination, claimed);
    const failures = await publishObserved(destination, observed.records);
    observed.end(failures);
    return failures;
  }

  async function publishObserved(
    destination: string,
    records: readonly OutboxRecord[],
  ): Promise<Map<string, unknown>> {
    const failures = new Map<string, unknown>();
    const publisher = publishers.get(destination);
    if (publisher === undefined) {
      const error = new PublishError(destination, 'no publisher is configured for it');
      for (const r of records) failures.set(r.id, error);
      return failures;
    }
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new PublishError(
          destination,
          `no answer within ${config.publishTimeoutMs} ms`,
        );
        controller.abort(error);
        reject(error);
      }, config.publishTimeoutMs);
    });
    try {
      const result = await Promise.race([publisher.publish(records, controller.signal), timeout]);
      if (result instanceof Map) {
        for (const [id, error] of result as ReadonlyMap<string, unknown>) failures.set(id, error);
      }
    } catch (error) {
      for (const r of records) failures.set(r.id, error);
    } finally {
      clearTimeout(timer);
    }
    return failures;
  }

  async function settle(batch: ClaimedBatch): Promise<void> {
    const started = performance.now();
    const groups = new Map<string, OutboxRecord[]>();
    for (const record of batch.records) {
      const group = groups.get(record.destination) ?? [];
      group.push(record);
      groups.set(record.destination, group);
    }
    const errors = new Map<string, unknown>();
    await Promise.all(
      [...groups].map(async ([destination, records]) => {
        for (const [id, error] of await publishGroup(destination, records)) errors.set(id, error);
      }),
    );
    const byId = new Map(batch.records.map((r) => [r.id, r]));
    const okIds = batch.records.filter((r) => !errors.has(r.id)).map((r) => r.id);
    const failures: Failure[] = [...errors].map(([id, error]) => ({
      id,
      error: describe(error).slice(0, 4000),
      delayMs: retryDelay(byId.get(id)?.attempts ?? 1, config.backoff),
      park: error instanceof EffectivelyOnceError && !error.retryable,
    }));
    const [marked, failed] = await Promise.all([
      statements.markPublished(okIds, batch.token),
      statements.markFailed(failures, batch.token, config.maxAttempts),
    ]);
    const summary = {
      claimed: batch.records.length,
      published: 0,
      failed: 0,
      parked: 0,
      fenced: 0,
    };
    for (const id of okIds) {
      const record = byId.get(id)!;
      const ageMs = marked.get(id);
      if (ageMs === undefined) {
        summary.fenced++;
        hub.emit('fenced', { id, destination: record.destination });
        continue;
      }
      summary.published++;
      hub.emit('published', {
        id,
        destination: record.destination,
        orderingKey: record.orderingKey,
        attempts: record.attempts,
        ageMs,
      });
    }
    const outcome = new Map(failed.map((f) => [f.id, f.state]));
    for (const failure of failures) {
      const record = byId.get(failure.id)!;
      const error = errors.get(failure.id);
      const state = outcome.get(failure.id);
      summary.failed++;
      if (state === undefined) {
        summary.fenced++;
        hub.emit('fenced', { id: failure.id, destination: record.destination });
      } else if (state === 'parked') {
        summary.parked++;
        hub.emit('parked', {
          id: failure.id,
          destination: record.destination,
          attempts: record.attempts,
          error,
        });
      } else {
        hub.emit('failed', {
          id: failure.id,
          destination: record.destination,
          attempts: record.attempts,
          error,
          retryInMs: failure.delayMs,
        });
      }
    }
    counters.batches++;
    counters.published += summary.published;
    counters.failed += summary.failed;
    counters.parked += summary.parked;
    counters.fenced += summary.fenced;
    hub.emit('batch', { ...summary, latencyMs: performance.now() - started });
  }

  async function run(): Promise<void> {
    let failures = 0;
    while (state === 'running') {
      let batch: ClaimedBatch | undefined;
      try {
        batch = await statements.claim(owner, config.batchSize, config.leaseMs);
        if (batch !== undefined) await settle(batch);
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

  const relay: Relay = {
    owner,
    async start() {
      if (state !== 'new') throw new StateError(`relay.start() called while ${state}`);
      state = 'running';
      const listen = options.listen ?? true;
      if (listen !== false) {
        const clientConfig: ClientConfig = listen === true ? { ...options.pool.options } : listen;
        listener = new NotifyListener(clientConfig, outboxChannel(ref), {
          wake,
          lost: (error) => fail(new DatabaseError('outbox LISTEN connection', error), 'listen'),
        });
        await listener.start();
      }
      if (options.retention !== undefined) {
        const { publishedMs } = options.retention;
        const every = intOption(
          'retention.intervalMs',
          options.retention.intervalMs,
          60_000,
          1000,
          86_400_000,
        );
        const prune = (): void =>
          void pruneOutbox(options.pool, { ...ref, olderThan: publishedMs }).catch(
            (error: unknown) => fail(error, 'outbox retention'),
          );
        timers.push(setInterval(prune, every));
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
    },
    async stop() {
      if (state !== 'running') return;
      state = 'stopping';
      for (const timer of timers) clearInterval(timer);
      ring?.();
      await loop;
      await listener?.close();
      state = 'stopped';
    },
    wake,
    on: (event, fn) => hub.on(event, fn),
    off: (event, fn) => hub.off(event, fn),
    metrics: () => ({ ...counters }),
    stats: () => outboxStats(options.pool, ref),
  };
  try {
    telemetry?.attach?.(relay);
  } catch (err) {
    logger.warn({ err }, 'effectively-once: relay telemetry attach threw');
  }
  return relay;
}
