import type { Pool, PoolClient } from 'pg';
import type { Routing } from '../routing/options.js';
import type { DataLayer } from '../data-layer.js';
import { ConfigurationError } from '../errors.js';
import { isWellFormedText } from '../keys.js';
import { intOption, refuseRenamed } from '../option-checks.js';
import {
  DOOR_DEFAULTS,
  resolveSharedOptions,
  type SharedConfig,
  type StoreOptions,
  type TransactionOptions,
} from '../shared-options.js';
import type { FingerprintMode } from './fingerprint.js';
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

/**
 * Options of {@link createIdempotency}; every one is checked when it is called. The
 * shared ones are `StoreOptions` and `TransactionOptions`: the key table
 * defaults to `eo_idempotency_keys`; `retention` is on by default, keys expiring 24 h
 * after their claim (Stripe's lifetime; the IETF draft expects keys to expire), `false`
 * keeps them until `prune({ olderThan })` removes them; `handlerTimeoutMs` defaults to
 * 30 000 (a client is waiting; past it the answer is 503, reading the response body
 * included); `lockTimeoutMs` is how long a retry waits on its running original.
 */
export interface IdempotencyOptions<Tx = PoolClient>
  extends StoreOptions<IdempotencyTelemetry>, TransactionOptions {
  /**
   * pg pool of the database holding the key table and the handlers' effects; or a
   * {@link Routing}: several databases, each request's key claimed (its effect written,
   * its answer stored) in the one its route names (docs/routing.md).
   */
  pool: Pool | Routing<Tx>;
  /**
   * The data layer the handlers write their effects with (see `TransactionOptions`):
   * each request's claim, handler and stored response then run in the layer's own
   * transaction, opened in its idiom, and `ctx.tx` is the layer's transaction object,
   * typed `Tx`. The claim and the stored response are single statements through the
   * layer's raw-SQL call. Default: none, `ctx.tx` is a pg client of `pool`.
   */
  dataLayer?: DataLayer<Tx>;
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
   * it, up to `lockTimeoutMs`, then replays its committed response (or runs, if the original
   * rolled back), however many retries come: those of one key in this process wait
   * behind one pool connection, in memory, and are all answered from the row the
   * original committed. `'reject'` answers 409 at once, as the IETF draft and Stripe do.
   * Either way, past the wait it is 409 with `Retry-After`.
   */
  concurrent?: 'wait' | 'reject';
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
   * Called after a response was stored and its transaction committed, before it is
   * handed back to be sent. For metrics, and for tests that kill the process there.
   * It cannot change the response; if it throws, the error is logged.
   */
  onCommitted?: (event: CommittedEvent) => void | Promise<void>;
  /**
   * Prefix of the `type` URI of problem+json answers (`<prefix>key-missing` …). Default
   * `urn:effectively-once:problem:`; point it at your API's documentation.
   */
  problemTypeBase?: string;
}

/** Options with defaults applied and bounds checked. */
export interface IdempotencyConfig<Tx = PoolClient> extends SharedConfig<IdempotencyTelemetry> {
  /** The data layer of the claim transactions, if any. */
  dataLayer: DataLayer<Tx> | undefined;
  scope: (request: Request) => string | Promise<string>;
  /** The scope when it is a constant: no Request needs building to ask for it. */
  constantScope: string | undefined;
  header: string;
  methods: ReadonlySet<string>;
  route: (request: Request) => string;
  /** `route` is the default, the URL's path: no Request needs building to ask for it. */
  routeIsPath: boolean;
  fingerprint: FingerprintMode;
  mismatchStatus: number;
  concurrent: 'wait' | 'reject';
  retryAfterSeconds: number;
  rollbackOn: (status: number) => boolean;
  storeHeaders: ReadonlySet<string>;
  maxBodyBytes: number;
  maxRequestBytes: number;
  onCommitted: ((event: CommittedEvent) => void | Promise<void>) | undefined;
  problemTypeBase: string;
}

/** Default name of the key table. */
export const DEFAULT_TABLE = DOOR_DEFAULTS.http.table;
/** Default key lifetime (`retention.olderThanMs`): 24 h, as Stripe keeps keys. */
export const DEFAULT_KEY_LIFETIME_MS = DOOR_DEFAULTS.http.retentionMs;
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

export function resolveOptions<Tx = PoolClient>(
  options: IdempotencyOptions<Tx>,
): IdempotencyConfig<Tx> {
  if (typeof options !== 'object' || options === null)
    throw new ConfigurationError('options', 'must be an object');
  refuseRenamed(options, { waitMs: 'use lockTimeoutMs', timeoutMs: 'use handlerTimeoutMs' });
  const shared = resolveSharedOptions(options, DOOR_DEFAULTS.http, {
    type: 'IdempotencyTelemetry',
    methods: ['startRequest'],
  });
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
  const fp = options.fingerprint ?? 'raw';
  if (fp !== 'raw' && fp !== 'json' && typeof fp !== 'function')
    throw new ConfigurationError('fingerprint', "must be 'raw', 'json' or a function");
  const concurrent = options.concurrent ?? 'wait';
  if (concurrent !== 'wait' && concurrent !== 'reject')
    throw new ConfigurationError('concurrent', "must be 'wait' or 'reject'", {
      value: concurrent,
    });
  return {
    ...shared,
    // Checked by resolveSharedOptions; typed here by the endpoint family's Tx.
    dataLayer: options.dataLayer,
    scope: typeof scope === 'string' ? constantScope(scope) : scope,
    constantScope: typeof scope === 'string' ? scope : undefined,
    header,
    methods: new Set(methods.map((m: string) => m.toUpperCase())),
    route: options.route ?? ((request) => new URL(request.url).pathname),
    routeIsPath: options.route === undefined,
    fingerprint: fp,
    mismatchStatus: intOption('mismatchStatus', options.mismatchStatus, 422, 400, 499),
    concurrent,
    // 'reject' still waits a millisecond: lock_timeout 0 would mean "wait forever".
    lockTimeoutMs: concurrent === 'reject' ? 1 : shared.lockTimeoutMs,
    retryAfterSeconds: intOption('retryAfterSeconds', options.retryAfterSeconds, 1, 0, 3600),
    rollbackOn: options.rollbackOn ?? ((status) => status >= 500),
    storeHeaders: storedHeaders(options.storeHeaders),
    maxBodyBytes: intOption('maxBodyBytes', options.maxBodyBytes, MIB, 0, 64 * MIB),
    maxRequestBytes: intOption('maxRequestBytes', options.maxRequestBytes, MIB, 0, 1024 * MIB),
    onCommitted: options.onCommitted,
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
