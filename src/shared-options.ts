/**
 * The options the three doors (consumer, request side, outbox relay) share: one
 * spelling, one bound and one resolver for each. A door's options type extends
 * {@link StoreOptions} (and {@link TransactionOptions} when it claims keys); the door's
 * own defaults, where its semantics need one of its own, are in {@link DOOR_DEFAULTS}.
 */
import type { Pool } from 'pg';
import type { DataLayer } from './data-layer.js';
import { ConfigurationError } from './errors.js';
import { silentLogger } from './logger.js';
import { fractionOption, intOption } from './option-checks.js';
import {
  resolveReplicaSafe,
  type ReplicaSafeOptions,
  type ResolvedReplicaSafe,
} from './replica/options.js';
import type { IsolationLevel } from './store/claim.js';
import { quoteIdentifier, type TableRef } from './store/identifiers.js';
import {
  DEFAULT_DATABASE,
  resolveRouting,
  type ResolvedDatabase,
  type ResolvedRouting,
  type Routing,
} from './routing/options.js';
import type { Logger } from './types.js';

/**
 * A window of rows pruned in the background: rows older than `olderThanMs` go every
 * `intervalMs`, `batchSize` rows per DELETE, busy at most `dutyCycle` of the time (after
 * each batch it waits as long as the batch took, so a backlog never takes the database
 * from the claims).
 */
export interface RetentionOptions {
  /** How long a row is kept, in ms: 1 and up. The door's default, if any, is in {@link DOOR_DEFAULTS}. */
  olderThanMs?: number;
  /** How often a prune runs, in ms: 100 to 86 400 000. Default 60 000. */
  intervalMs?: number;
  /** Rows deleted per statement: 1 to 100 000. Default 1000. */
  batchSize?: number;
  /** Largest share of the time spent deleting, above 0 and at most 1. Default 0.5. */
  dutyCycle?: number;
}

/** {@link RetentionOptions} with every default filled in. */
export interface ResolvedRetention {
  olderThanMs: number;
  intervalMs: number;
  batchSize: number;
  dutyCycle: number;
}

/** Where a door keeps its rows, and who it reports to. Every door's options extend it. */
export interface StoreOptions<Telemetry> {
  /**
   * pg pool of the database holding the door's table (and, for a claim, the effects); or,
   * at the consumer and the HTTP door, a {@link Routing}: several databases and the route
   * that sends each key to its own (docs/routing.md).
   */
  pool: Pool | Routing;
  /** Schema of the door's table. Default `public`. */
  schema?: string;
  /** Name of the door's table. Default: the door's own (see {@link DOOR_DEFAULTS}). */
  table?: string;
  /**
   * Apply the door's table's pending migration steps before it first uses it. Default
   * true. `false`: check the migration ledger instead, and refuse to start (the
   * consumer's `start()` rejects, the HTTP door answers 500) with
   * `MigrationsPendingError` while a step is pending; a database that does not answer is
   * waited for, not refused.
   */
  migrate?: boolean;
  /**
   * Background pruning of the door's rows (see {@link RetentionOptions}); `false` or
   * absent where the door's default is off: never pruned here. Whether it is on by
   * default and for how long is per door, in {@link DOOR_DEFAULTS}.
   */
  retention?: RetentionOptions | false;
  /** pino-compatible logger. Default: silent. */
  logger?: Logger;
  /** Tracing and metrics hooks, e.g. the door's hooks from `effectively-once/otel`. Default: none. */
  telemetry?: Telemetry;
  /**
   * Hold the outward step (ack, answer, publish) until the commit is on the standby a
   * failover would promote (see {@link ReplicaSafeOptions}, docs/replica-safe.md).
   * Default off: the primary's COMMIT is enough.
   */
  replicaSafe?: ReplicaSafeOptions | false;
}

/** How a door's claim transaction runs. The consumer and the request side extend it. */
export interface TransactionOptions {
  /**
   * Isolation level of the claim's transaction (`BEGIN ISOLATION LEVEL ...`). Default:
   * the database's `default_transaction_isolation` (usually read committed).
   */
  isolationLevel?: IsolationLevel;
  /**
   * How many times a transaction that hit a serialization failure or a deadlock
   * (SQLSTATE 40001 / 40P01, in the claim, a handler statement or COMMIT) is rolled back
   * and run again at once, handler included. 0 to 100. Default 3.
   */
  serializationRetries?: number;
  /** Longest wait for a pool connection, in ms: 1 to 3 600 000. Default 10 000. */
  acquireTimeoutMs?: number;
  /**
   * Longest wait for a concurrent claim of the same key (a retry while the original
   * still runs), in ms: 1 to 3 600 000. Default 5000.
   */
  lockTimeoutMs?: number;
  /**
   * Abort and roll back a handler that runs longer than this, in ms: 0 (never) to
   * 86 400 000. Default: per door (see {@link DOOR_DEFAULTS}).
   */
  handlerTimeoutMs?: number;
  /** Longest accepted key, in characters: 1 to 1024. Default 255 (the IETF draft's and Stripe's). */
  maxKeyLength?: number;
  /**
   * The data layer whose transaction the claim runs in (`prismaLayer(prisma)` from
   * `effectively-once/prisma`, `knexLayer(knex)`…): the handler's `ctx.tx` is then the
   * layer's own transaction object. Absent: the library opens the transaction on a
   * client of `pool`, and `ctx.tx` is that pg client. `pool` stays required either way
   * (migrations, pruning, and the other connection that cancels a statement and settles
   * a COMMIT whose answer was lost); it must reach the same database as the layer.
   */
  dataLayer?: DataLayer<unknown>;
}

/** Every shared option; a door that has no claim transaction ignores its part. */
export type SharedOptions<Telemetry> = StoreOptions<Telemetry> & TransactionOptions;

/** A door's own defaults where the doors' semantics differ; see {@link DOOR_DEFAULTS}. */
export interface DoorDefaults {
  /** The door's table. */
  table: string;
  /** The default `retention.olderThanMs`; undefined: retention is off unless given. */
  retentionMs: number | undefined;
  /** The default `handlerTimeoutMs`. */
  handlerTimeoutMs: number;
}

/**
 * The per-door defaults, in one place. They differ only where the door's meaning does:
 * - **table**: each door has its own table (claims, stored responses, outbox rows).
 * - **retention**: an HTTP key expires after 24 h (Stripe's lifetime; the IETF
 *   Idempotency-Key draft expects keys to expire), so it is on by default. A consumer's
 *   window must cover its broker's redelivery (SQS retention, a Kafka offset reset), which
 *   only the operator knows, so it is off until set. Published outbox rows are audit
 *   history the dedup does not need; keeping them is the operator's choice, so off.
 * - **handlerTimeoutMs**: an HTTP client is waiting on the handler (proxies and clients
 *   commonly give up within 30 to 60 s); a consumer's handler has no one waiting and may
 *   run longer. The relay runs no handler (it has `publishTimeoutMs`).
 */
export const DOOR_DEFAULTS = {
  consumer: { table: 'processed_messages', retentionMs: undefined, handlerTimeoutMs: 60_000 },
  http: { table: 'eo_idempotency_keys', retentionMs: 24 * 3600_000, handlerTimeoutMs: 30_000 },
  relay: { table: 'eo_outbox', retentionMs: undefined, handlerTimeoutMs: 0 },
} as const satisfies Record<string, DoorDefaults>;

/** How the resolver checks a door's telemetry: the functions it must have. */
export interface TelemetryShape {
  /** The door's telemetry type, for the error message (`ConsumerTelemetry`). */
  type: string;
  /** Functions a telemetry object must have (`startDelivery`). */
  methods: readonly string[];
}

/** {@link SharedOptions} with defaults applied and bounds checked. */
export interface SharedConfig<Telemetry> {
  /** The pool of the door's one database (with routing: the first database's; see `databases`). */
  pool: Pool;
  /**
   * Every database of the door, each with its pool and data layer: `pool` alone (named
   * `default`) without routing. What runs per database (migrations, pruning, the health
   * probe, the replica guard, the claim transactions) runs for each of these.
   */
  databases: ResolvedDatabase[];
  /** Undefined: the door has one database. */
  routing: ResolvedRouting | undefined;
  table: TableRef;
  migrate: boolean;
  /** Undefined when retention is off. */
  retention: ResolvedRetention | undefined;
  logger: Logger;
  telemetry: Telemetry | undefined;
  isolationLevel: IsolationLevel | undefined;
  serializationRetries: number;
  acquireTimeoutMs: number;
  lockTimeoutMs: number;
  handlerTimeoutMs: number;
  maxKeyLength: number;
  /** Undefined: the claim transaction is the library's own, on `pool`. */
  dataLayer: DataLayer<unknown> | undefined;
  /** Undefined: off. */
  replicaSafe: ResolvedReplicaSafe | undefined;
}

/** Default longest key, in characters (the IETF draft's and Stripe's Idempotency-Key limit). */
export const DEFAULT_MAX_KEY_LENGTH = 255;
/** Highest `maxKeyLength` any door accepts. */
export const MAX_KEY_LENGTH = 1024;

const ISOLATION_LEVELS: readonly IsolationLevel[] = [
  'read committed',
  'repeatable read',
  'serializable',
];

/**
 * Validates the shared options of one door and fills in their defaults (the door's own
 * where {@link DOOR_DEFAULTS} gives one); throws a {@link ConfigurationError} naming the
 * first bad option.
 */
export function resolveSharedOptions<Telemetry>(
  options: SharedOptions<Telemetry>,
  door: DoorDefaults,
  telemetryShape: TelemetryShape,
): SharedConfig<Telemetry> {
  if (typeof options !== 'object' || options === null)
    throw new ConfigurationError('options', 'must be an object');
  const routing = resolveRouting(options.pool, resolveDataLayer(options.dataLayer), (layer, name) =>
    resolveDataLayer(layer, name),
  );
  if (routing === undefined && typeof (options.pool as Pool | undefined)?.connect !== 'function')
    throw new ConfigurationError('pool', 'must be a pg Pool, or a Routing ({ databases, route })');
  const dataLayer = routing === undefined ? resolveDataLayer(options.dataLayer) : undefined;
  const databases = routing?.databases ?? [
    { name: DEFAULT_DATABASE, pool: options.pool as Pool, dataLayer },
  ];
  const table = { schema: options.schema ?? 'public', table: options.table ?? door.table };
  quoteIdentifier(table.schema, 'schema');
  quoteIdentifier(table.table, 'table');
  const isolationLevel = options.isolationLevel;
  if (isolationLevel !== undefined && !ISOLATION_LEVELS.includes(isolationLevel))
    throw new ConfigurationError(
      'isolationLevel',
      `must be one of ${ISOLATION_LEVELS.join(', ')}`,
      { isolationLevel },
    );
  const telemetry = options.telemetry;
  if (
    telemetry !== undefined &&
    telemetryShape.methods.some(
      (m) => typeof (telemetry as Record<string, unknown> | null)?.[m] !== 'function',
    )
  )
    throw new ConfigurationError(
      'telemetry',
      `must be a ${telemetryShape.type} (with ${telemetryShape.methods.join(' and ')}), e.g. from effectively-once/otel`,
    );
  return {
    pool: databases[0]!.pool,
    databases,
    routing,
    table,
    migrate: bool('migrate', options.migrate, true),
    retention: resolveRetention(options.retention, door.retentionMs),
    logger: options.logger ?? silentLogger,
    telemetry,
    isolationLevel,
    serializationRetries: intOption(
      'serializationRetries',
      options.serializationRetries,
      3,
      0,
      100,
    ),
    acquireTimeoutMs: intOption('acquireTimeoutMs', options.acquireTimeoutMs, 10_000, 1, 3_600_000),
    lockTimeoutMs: intOption('lockTimeoutMs', options.lockTimeoutMs, 5000, 1, 3_600_000),
    handlerTimeoutMs: intOption(
      'handlerTimeoutMs',
      options.handlerTimeoutMs,
      door.handlerTimeoutMs,
      0,
      86_400_000,
    ),
    maxKeyLength: intOption(
      'maxKeyLength',
      options.maxKeyLength,
      DEFAULT_MAX_KEY_LENGTH,
      1,
      MAX_KEY_LENGTH,
    ),
    dataLayer: databases[0]!.dataLayer,
    replicaSafe: resolveReplicaSafe(options.replicaSafe),
  };
}

const DATA_LAYER_METHODS = ['transaction', 'sql', 'serverError'] as const;

/** A data layer must at least have the functions the claim transaction calls. */
function resolveDataLayer(layer: unknown, option = 'dataLayer'): DataLayer<unknown> | undefined {
  if (layer === undefined) return undefined;
  const fields =
    typeof layer === 'object' && layer !== null ? (layer as Record<string, unknown>) : {};
  if (
    typeof layer !== 'object' ||
    layer === null ||
    DATA_LAYER_METHODS.some((m) => typeof fields[m] !== 'function')
  )
    throw new ConfigurationError(
      option,
      `must be a DataLayer (with ${DATA_LAYER_METHODS.join(', ')}), e.g. prismaLayer(prisma) from effectively-once/prisma`,
    );
  return layer as DataLayer<unknown>;
}

/** The retention of a door: off when `false`, or when absent and the door has no default. */
function resolveRetention(
  retention: RetentionOptions | false | undefined,
  defaultMs: number | undefined,
): ResolvedRetention | undefined {
  if (retention === false || (retention === undefined && defaultMs === undefined)) return undefined;
  if (retention !== undefined && (typeof retention !== 'object' || retention === null))
    throw new ConfigurationError('retention', 'must be an object or false');
  if (retention?.olderThanMs === undefined && defaultMs === undefined)
    throw new ConfigurationError('retention.olderThanMs', 'is required: how long rows are kept');
  return {
    olderThanMs: intOption(
      'retention.olderThanMs',
      retention?.olderThanMs,
      defaultMs ?? 0,
      1,
      Number.MAX_SAFE_INTEGER,
    ),
    intervalMs: intOption('retention.intervalMs', retention?.intervalMs, 60_000, 100, 86_400_000),
    batchSize: intOption('retention.batchSize', retention?.batchSize, 1000, 1, 100_000),
    dutyCycle: fractionOption('retention.dutyCycle', retention?.dutyCycle, 0.5),
  };
}

function bool(option: string, value: boolean | undefined, fallback: boolean): boolean {
  const v = value ?? fallback;
  if (typeof v !== 'boolean') throw new ConfigurationError(option, 'must be a boolean', { value });
  return v;
}
