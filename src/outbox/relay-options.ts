import type { ClientConfig, Pool } from 'pg';
import { ConfigurationError } from '../errors.js';
import { intOption } from '../option-checks.js';
import { isRouting } from '../routing/options.js';
import {
  DOOR_DEFAULTS,
  resolveSharedOptions,
  type SharedConfig,
  type StoreOptions,
} from '../shared-options.js';
import type { Publisher } from './record.js';
import type { RelayTelemetry } from './telemetry.js';

/**
 * Options of {@link createRelay}. The shared ones are `StoreOptions`: the pool the
 * outbox table is in (the relay's claims and marks use it), the table (default
 * `public.eo_outbox`), `retention` of published rows (off by default: they are audit
 * history the dedup does not need, the id travels with the message), the logger (where
 * `error` events nobody listens for go) and telemetry. No `migrate`: `enqueue` writes the
 * table from the application's transactions before any relay runs, so it is created at
 * deploy (`migrateOutbox`, or the command line), not by a relay.
 */
export interface RelayOptions extends Omit<StoreOptions<RelayTelemetry>, 'migrate'> {
  /**
   * pg pool of the database the outbox table is in. A relay serves one database: with
   * several (a routed door's), run one relay per database.
   */
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
   * Longest wait for one publisher call, in ms; then its rows count as failed and the
   * publisher's signal aborts. At most half of `leaseMs` (the default; more is refused
   * with a `ConfigurationError`), so a batch is settled before its lease runs out.
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
   * LISTEN needs a session of its own on the server: through a connection pooler
   * (PgBouncer in transaction mode delivers no notifications), detected at `start()`,
   * `true` polls instead and logs one warn line, and a `ClientConfig` is refused with a
   * `ListenThroughPoolerError`: give it a direct connection to Postgres.
   */
  listen?: boolean | ClientConfig;
  /** How often the `lag` event fires while it has a listener, in ms. Default 10 000. */
  lagIntervalMs?: number;
  /** Names this relay in `lease_owner`. Default `host:pid:random`. */
  owner?: string;
}

/** The relay's settings, validated, defaults filled in. */
export interface ResolvedRelayOptions extends Omit<
  SharedConfig<RelayTelemetry>,
  keyof TransactionConfig | 'migrate'
> {
  batchSize: number;
  leaseMs: number;
  publishTimeoutMs: number;
  pollIntervalMs: number;
  maxAttempts: number;
  backoff: { initialMs: number; maxMs: number };
  lagIntervalMs: number;
}

/** The shared settings of a claim transaction, which the relay does not run. */
type TransactionConfig = Pick<
  SharedConfig<unknown>,
  | 'isolationLevel'
  | 'serializationRetries'
  | 'acquireTimeoutMs'
  | 'lockTimeoutMs'
  | 'handlerTimeoutMs'
  | 'maxKeyLength'
  | 'dataLayer'
  | 'databases'
  | 'routing'
>;

/** Validates `options`; throws a `ConfigurationError` naming the first bad one. */
export function resolveRelayOptions(options: RelayOptions): ResolvedRelayOptions {
  if (isRouting(options.pool))
    throw new ConfigurationError(
      'pool',
      'a relay serves one database: run one createRelay() per routed database',
    );
  const { pool, table, retention, logger, telemetry, replicaSafe } = resolveSharedOptions(
    { ...options, migrate: false },
    DOOR_DEFAULTS.relay,
    { type: 'RelayTelemetry', methods: ['startPublish'] },
  );
  if (options.publishers === null || typeof options.publishers !== 'object')
    throw new ConfigurationError('publishers', 'must map each destination to a publisher');
  for (const [destination, publisher] of Object.entries(options.publishers)) {
    if (typeof (publisher as Partial<Publisher> | undefined)?.publish !== 'function')
      throw new ConfigurationError('publishers', `"${destination}" has no publish function`);
  }
  // The relay publishes rows other transactions committed: there is no COMMIT of its
  // own to make synchronous, only the standby's position to wait for.
  if (replicaSafe?.mode === 'synchronous-commit')
    throw new ConfigurationError(
      'replicaSafe.mode',
      "the relay publishes rows that other transactions committed: use mode 'wait'",
    );
  const leaseMs = intOption('leaseMs', options.leaseMs, 30_000, 1000, 3_600_000);
  const initialMs = intOption('backoff.initialMs', options.backoff?.initialMs, 1000, 0, 86_400_000);
  return {
    pool,
    table,
    retention,
    logger,
    telemetry,
    replicaSafe,
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
