import type { Pool } from 'pg';
import { ConfigurationError } from '../errors.js';
import { isWellFormedText } from '../keys.js';
import { silentLogger } from '../logger.js';
import { fractionOption, intOption } from '../option-checks.js';
import type { IsolationLevel } from '../store/claim.js';
import { quoteIdentifier, type TableRef } from '../store/identifiers.js';
import type { Logger } from '../types.js';
import type { FingerprintMode } from './fingerprint.js';
import { DEFAULT_MAX_KEY_LENGTH } from './key.js';
import type { IdempotencyTelemetry } from './telemetry.js';

/** What {@link IdempotencyOptions.onCommitted} is told. */
export interface CommittedEvent {
  /** The scope the key was claimed in. */
  scope: string;
  /** The idempotency key. */
  key: string;
  /** The request's method. */
  method: string;
  /** The route the key is bound to. */
  route: string;
  /** The status stored and about to be sent. */
  status: number;
}

/** Options of {@link createIdempotency}; every one is checked when it is called. */
export interface IdempotencyOptions {
  /** pg pool of the database that holds both the key table and the handlers' effects. */
  pool: Pool;
  /**
   * Whose keys these are: the tenant or authenticated principal of a request. Keys are
   * unique per scope, so a key sent by tenant A never replays tenant B's response. A
   * string for a single-tenant API, or a function of the request (it runs before the
   * claim; what it throws fails the request, nothing claimed). At most 1024 characters.
   */
  scope: string | ((request: Request) => string | Promise<string>);
  /** The header that carries the key. Default `Idempotency-Key`. */
  header?: string;
  /**
   * Methods on which the key is required (missing: 400). Requests with other methods
   * are made idempotent when they carry a key, and otherwise run once in a
   * transaction of their own, nothing stored. Default `['POST', 'PATCH']`.
   */
  methods?: readonly string[];
  /** Longest key accepted, in characters: 1 to 1024. Default 255 (the draft's and Stripe's). */
  maxKeyLength?: number;
  /**
   * The endpoint a key belongs to, compared (with the method) when a key comes back:
   * reusing a key on another endpoint is answered like a body mismatch, never replayed.
   * Default: the URL's path (`/orders/42/refunds`).
   */
  route?: (request: Request) => string;
  /** How requests are fingerprinted. Default `'raw'`. See {@link FingerprintMode}. */
  fingerprint?: FingerprintMode;
  /** Status for a key reused with another request. Default 422 (the IETF draft); Stripe answers 400. */
  mismatchStatus?: number;
  /**
   * A retry that arrives while the original is running: `'wait'` (default) waits for
   * it, up to `waitMs`, then replays its committed response (or runs, if the original
   * rolled back), however many retries come: those of one key in this process wait
   * behind one pool connection, in memory, and are all answered from the row the
   * original committed. `'reject'` answers 409 at once, as the IETF draft and Stripe do.
   * Either way, past the wait it is 409 with `Retry-After`.
   */
  concurrent?: 'wait' | 'reject';
  /** Longest wait on a running original, in ms: 1 to 3 600 000. Default 5000. */
  waitMs?: number;
  /** `Retry-After` of 409 and 503 answers, in seconds: 0 to 3600. Default 1. */
  retryAfterSeconds?: number;
  /**
   * Which statuses a handler's response rolls back instead of committing: the effect is
   * undone, nothing is stored, and a retry with the key runs afresh. Default: 500 and
   * above.
   */
  rollbackOn?: (status: number) => boolean;
  /**
   * Response headers stored with the response and replayed (lower-case), replacing the
   * default list: content-type, content-encoding, content-language, content-disposition,
   * content-location, location, etag, last-modified, link, cache-control, expires.
   * `set-cookie` and hop-by-hop headers are refused.
   */
  storeHeaders?: readonly string[];
  /**
   * Largest response body stored, in bytes: 0 to 64 MiB. Default 1 MiB. A larger body
   * is sent in full the first time, but a replay has an empty body and the header
   * `Idempotent-Body-Omitted: too-large`.
   */
  maxBodyBytes?: number;
  /** Largest request body read, in bytes: 0 to 1 GiB. Default 1 MiB; larger is 413. */
  maxRequestBytes?: number;
  /**
   * Abort and roll back a handler (reading its response body included) that runs
   * longer than this, in ms; the client gets 503. Default 30 000; 0 disables.
   */
  timeoutMs?: number;
  /**
   * How many times a transaction that hit a serialization failure or deadlock (40001,
   * 40P01) is rolled back and run again at once, handler included. Default 3, 0..100.
   */
  serializationRetries?: number;
  /** Isolation level of the claim's transaction. Default: the database's default. */
  isolationLevel?: IsolationLevel;
  /** Longest wait for a pool connection, in ms; past it the answer is 503. Default 10 000. */
  acquireTimeoutMs?: number;
  /** Schema of the key table. Default `public`. */
  schema?: string;
  /** Name of the key table. Default `eo_idempotency_keys`. */
  table?: string;
  /** Create the key table (if missing) before the first request. Default true. */
  migrate?: boolean;
  /**
   * Key lifetime: each key's row carries its expiry, `olderThanMs` (default 24 h,
   * Stripe's) after its claim, and expired rows are pruned in the background every
   * `intervalMs` (default 60 000), `batchSize` rows per DELETE (default 1000), busy at
   * most `dutyCycle` of the time (default 0.5). A key stays valid at least that long,
   * whatever other configurations sharing the table prune. `false`: the keys never
   * expire and nothing is pruned here; only `prune({ olderThan })` removes them.
   */
  retention?:
    { olderThanMs?: number; intervalMs?: number; batchSize?: number; dutyCycle?: number } | false;
  /**
   * Called after a response was stored and its transaction committed, before it is
   * handed back to be sent. For metrics, and for tests that kill the process there.
   * It cannot change the response; if it throws, the error is logged.
   */
  onCommitted?: (event: CommittedEvent) => void | Promise<void>;
  /** pino-compatible logger. Default: silent. */
  logger?: Logger;
  /**
   * Tracing and metrics hooks: `otelIdempotencyTelemetry()` from `effectively-once/otel`
   * gives each request a span with its outcome and counts replays and 409s.
   */
  telemetry?: IdempotencyTelemetry;
  /**
   * Prefix of the `type` URI of problem+json answers (`<prefix>key-missing` …). Default
   * `urn:effectively-once:problem:`; point it at your API's documentation.
   */
  problemTypeBase?: string;
}

/** Options with defaults applied and bounds checked. */
export interface IdempotencyConfig {
  pool: Pool;
  scope: (request: Request) => string | Promise<string>;
  /** The scope when it is a constant: no Request needs building to ask for it. */
  constantScope: string | undefined;
  header: string;
  methods: ReadonlySet<string>;
  maxKeyLength: number;
  route: (request: Request) => string;
  /** `route` is the default, the URL's path: no Request needs building to ask for it. */
  routeIsPath: boolean;
  fingerprint: FingerprintMode;
  mismatchStatus: number;
  concurrent: 'wait' | 'reject';
  waitMs: number;
  retryAfterSeconds: number;
  rollbackOn: (status: number) => boolean;
  storeHeaders: ReadonlySet<string>;
  maxBodyBytes: number;
  maxRequestBytes: number;
  timeoutMs: number;
  serializationRetries: number;
  isolationLevel: IsolationLevel | undefined;
  acquireTimeoutMs: number;
  table: TableRef;
  migrate: boolean;
  retention:
    { olderThanMs: number; intervalMs: number; batchSize: number; dutyCycle: number } | undefined;
  onCommitted: ((event: CommittedEvent) => void | Promise<void>) | undefined;
  logger: Logger;
  telemetry: IdempotencyTelemetry | undefined;
  problemTypeBase: string;
}

/** Default name of the key table. */
export const DEFAULT_TABLE = 'eo_idempotency_keys';
/** Default key lifetime (`retention.olderThanMs`): 24 h, as Stripe keeps keys. */
export const DEFAULT_KEY_LIFETIME_MS = 24 * 3600_000;
const MIB = 1024 * 1024;

/** Headers worth replaying: they describe the stored body or the resource created. */
export const DEFAULT_STORED_HEADERS: readonly string[] = [
  'content-type',
  'content-encoding',
  'content-language',
  'content-disposition',
  'content-location',
  'location',
  'etag',
  'last-modified',
  'link',
  'cache-control',
  'expires',
];

// Never replayed: a cookie belongs to the session that got it; the rest describe one
// connection or one transfer, not the response.
const REFUSED_HEADERS = new Set([
  'set-cookie',
  'set-cookie2',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'trailer',
  'te',
  'proxy-connection',
]);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const ISOLATION: readonly IsolationLevel[] = ['read committed', 'repeatable read', 'serializable'];

export function resolveOptions(options: IdempotencyOptions): IdempotencyConfig {
  if (typeof options !== 'object' || options === null)
    throw new ConfigurationError('options', 'must be an object');
  if (typeof options.pool?.connect !== 'function')
    throw new ConfigurationError('pool', 'must be a pg Pool');
  const scope = options.scope;
  if (typeof scope !== 'string' && typeof scope !== 'function')
    throw new ConfigurationError(
      'scope',
      'is required: a string (single tenant) or a function of the request returning the tenant',
    );
  const header = options.header ?? 'Idempotency-Key';
  if (!TOKEN.test(header))
    throw new ConfigurationError('header', 'must be an HTTP header name', { value: header });
  const methods = options.methods ?? ['POST', 'PATCH'];
  if (!Array.isArray(methods) || methods.some((m) => typeof m !== 'string' || !TOKEN.test(m)))
    throw new ConfigurationError('methods', 'must be a list of HTTP method names');
  for (const name of ['route', 'rollbackOn', 'onCommitted'] as const) {
    const value = options[name];
    if (value !== undefined && typeof value !== 'function')
      throw new ConfigurationError(name, 'must be a function');
  }
  if (
    options.telemetry !== undefined &&
    typeof (options.telemetry as Partial<IdempotencyTelemetry> | null)?.startRequest !== 'function'
  )
    throw new ConfigurationError('telemetry', 'must have a startRequest function');
  const fp = options.fingerprint ?? 'raw';
  if (fp !== 'raw' && fp !== 'json' && typeof fp !== 'function')
    throw new ConfigurationError('fingerprint', "must be 'raw', 'json' or a function");
  const concurrent = options.concurrent ?? 'wait';
  if (concurrent !== 'wait' && concurrent !== 'reject')
    throw new ConfigurationError('concurrent', "must be 'wait' or 'reject'", {
      value: concurrent,
    });
  if (options.isolationLevel !== undefined && !ISOLATION.includes(options.isolationLevel))
    throw new ConfigurationError('isolationLevel', `must be one of ${ISOLATION.join(', ')}`);
  const table = {
    schema: options.schema ?? 'public',
    table: options.table ?? DEFAULT_TABLE,
  };
  quoteIdentifier(table.schema, 'schema');
  quoteIdentifier(table.table, 'table');
  const waitMs = intOption('waitMs', options.waitMs, 5000, 1, 3_600_000);
  return {
    pool: options.pool,
    scope: typeof scope === 'string' ? constantScope(scope) : scope,
    constantScope: typeof scope === 'string' ? scope : undefined,
    header,
    methods: new Set(methods.map((m: string) => m.toUpperCase())),
    maxKeyLength: intOption('maxKeyLength', options.maxKeyLength, DEFAULT_MAX_KEY_LENGTH, 1, 1024),
    route: options.route ?? ((request) => new URL(request.url).pathname),
    routeIsPath: options.route === undefined,
    fingerprint: fp,
    mismatchStatus: intOption('mismatchStatus', options.mismatchStatus, 422, 400, 499),
    concurrent,
    // 'reject' still waits a millisecond: lock_timeout 0 would mean "wait forever".
    waitMs: concurrent === 'reject' ? 1 : waitMs,
    retryAfterSeconds: intOption('retryAfterSeconds', options.retryAfterSeconds, 1, 0, 3600),
    rollbackOn: options.rollbackOn ?? ((status) => status >= 500),
    storeHeaders: storedHeaders(options.storeHeaders),
    maxBodyBytes: intOption('maxBodyBytes', options.maxBodyBytes, MIB, 0, 64 * MIB),
    maxRequestBytes: intOption('maxRequestBytes', options.maxRequestBytes, MIB, 0, 1024 * MIB),
    timeoutMs: intOption('timeoutMs', options.timeoutMs, 30_000, 0, 86_400_000),
    serializationRetries: intOption(
      'serializationRetries',
      options.serializationRetries,
      3,
      0,
      100,
    ),
    isolationLevel: options.isolationLevel,
    acquireTimeoutMs: intOption('acquireTimeoutMs', options.acquireTimeoutMs, 10_000, 1, 3_600_000),
    table,
    migrate: options.migrate ?? true,
    retention: resolveRetention(options.retention),
    onCommitted: options.onCommitted,
    logger: options.logger ?? silentLogger,
    telemetry: options.telemetry,
    problemTypeBase: options.problemTypeBase ?? 'urn:effectively-once:problem:',
  };
}

function constantScope(scope: string): () => string {
  checkScope(scope);
  return () => scope;
}

/**
 * Starts every scope a webhook delivery's key is stored under (U+001F, the unit
 * separator; see `webhookScope`), and no other: {@link checkScope} refuses it in a plain
 * scope, so no ordinary request, whatever its tenant, can claim a delivery's key.
 */
export const WEBHOOK_SCOPE_MARK = '\u001f';

/**
 * A scope is part of the primary key: bounded, and stored as itself. No NUL (Postgres
 * text cannot hold it) and no lone surrogate (node-postgres sends U+FFFD in its place,
 * so two tenants' scopes differing only there would share one key space). This is the
 * check of any stored scope (a webhook's included); {@link checkScope} is a plain one's.
 */
export function checkStoredScope(scope: unknown): string {
  if (
    typeof scope !== 'string' ||
    scope.length > 1024 ||
    scope.includes('\u0000') ||
    !isWellFormedText(scope)
  )
    throw new ConfigurationError(
      'scope',
      'must be a string of at most 1024 characters, no NUL, no lone UTF-16 surrogate',
      { scope: typeof scope === 'string' ? scope.slice(0, 64) : typeof scope },
    );
  return scope;
}

/**
 * A plain scope (an endpoint's, a request's, a tenant's): a stored scope without the
 * webhook mark, U+001F, so the webhook key space is out of every ordinary request's reach.
 */
export function checkScope(scope: unknown): string {
  checkStoredScope(scope);
  if ((scope as string).includes(WEBHOOK_SCOPE_MARK))
    throw new ConfigurationError(
      'scope',
      'must not contain U+001F: it marks the scopes of webhook deliveries, which no ordinary request can claim',
      { scope: (scope as string).slice(0, 64) },
    );
  return scope as string;
}

function storedHeaders(list: readonly string[] | undefined): ReadonlySet<string> {
  const names = list ?? DEFAULT_STORED_HEADERS;
  if (!Array.isArray(names))
    throw new ConfigurationError('storeHeaders', 'must be a list of header names');
  const out = new Set<string>();
  for (const name of names) {
    if (typeof name !== 'string' || !TOKEN.test(name))
      throw new ConfigurationError('storeHeaders', 'must be a list of header names', { name });
    const lower = name.toLowerCase();
    if (REFUSED_HEADERS.has(lower))
      throw new ConfigurationError(
        'storeHeaders',
        `"${lower}" is never stored: it belongs to one client or one connection`,
      );
    out.add(lower);
  }
  return out;
}

function resolveRetention(
  retention: IdempotencyOptions['retention'],
): IdempotencyConfig['retention'] {
  if (retention === false) return undefined;
  if (retention !== undefined && (typeof retention !== 'object' || retention === null))
    throw new ConfigurationError('retention', 'must be an object or false');
  return {
    olderThanMs: intOption(
      'retention.olderThanMs',
      retention?.olderThanMs,
      DEFAULT_KEY_LIFETIME_MS,
      1000,
      Number.MAX_SAFE_INTEGER,
    ),
    intervalMs: intOption('retention.intervalMs', retention?.intervalMs, 60_000, 100, 86_400_000),
    batchSize: intOption('retention.batchSize', retention?.batchSize, 1000, 1, 100_000),
    dutyCycle: fractionOption('retention.dutyCycle', retention?.dutyCycle, 0.5),
  };
}
