import type { Pool } from 'pg';
import type { DataLayer } from '../data-layer.js';
import { ConfigurationError } from '../errors.js';
import { intOption } from '../option-checks.js';
import type { Delivery } from '../types.js';

/**
 * What a route sees of one unit of work: the consumer's delivery or the HTTP door's
 * request, with the key the door claims. The route must answer the same database for the
 * same `scope` + `key` every time it is asked, in every process, for as long as the key's
 * claim is kept (see docs/routing.md): a key routed elsewhere is a new key there.
 */
export interface RouteTarget {
  /** The dedup key the door claims (the delivery's key; the request's Idempotency-Key). */
  readonly key: string;
  /** The key's namespace: the consumer's `name`; the HTTP door's scope (tenant, route). */
  readonly scope: string;
  /** The consumer's delivery (its attributes, headers, body); undefined at the HTTP door. */
  readonly delivery?: Delivery<unknown>;
  /** The HTTP door's request; undefined at the consumer. */
  readonly request?: Request;
}

/** One database of a routed door: its pool and, optionally, the data layer on it. */
export interface RoutedDatabase<Tx = unknown> {
  /** pg pool of this database: its tables, migrations, pruning, the read-back of a COMMIT. */
  pool: Pool;
  /** The data layer whose transaction the claim runs in on this database (see `dataLayer`). */
  dataLayer?: DataLayer<Tx>;
}

/**
 * `pool` as a function of the work: each key goes to one of several databases (tenant →
 * database, key → shard), where its claim, its effect, its stored answer and its outbox
 * rows live. Each database has its own tables, migrations, pruning and relay.
 */
export interface Routing<Tx = unknown> {
  /** The databases by name (the name is the `database` attribute of logs and telemetry). */
  databases: Readonly<Record<string, Pool | RoutedDatabase<Tx>>>;
  /**
   * The name of the database `target` belongs to. Must be a pure function of the key's
   * scope and key (or of what never changes for them, such as a tenant header): a key
   * that changes database is applied again there. A throw fails this attempt only.
   */
  route(target: RouteTarget): string;
  /**
   * How many recently routed keys each door remembers to catch a route that changes its
   * mind (`RoutingViolationError`): 0 to 10 000 000. Default 100 000.
   */
  rememberKeys?: number;
}

/** One database of a resolved routing (a door without routing has one, named `default`). */
export interface ResolvedDatabase {
  name: string;
  pool: Pool;
  dataLayer: DataLayer<unknown> | undefined;
}

/** {@link Routing} checked: the databases in the order given. */
export interface ResolvedRouting {
  databases: ResolvedDatabase[];
  route: (target: RouteTarget) => string;
  rememberKeys: number;
}

/** Name of the one database of a door that does not route. */
export const DEFAULT_DATABASE = 'default';

/** Whether `pool` is a {@link Routing} rather than one pg Pool. */
export function isRouting(pool: unknown): pool is Routing {
  return (
    typeof pool === 'object' &&
    pool !== null &&
    'databases' in pool &&
    typeof (pool as { route?: unknown }).route === 'function'
  );
}

/**
 * The databases of a door: `pool` itself (one database, with `dataLayer`), or a
 * {@link Routing}'s, each checked. A top-level `dataLayer` beside a routing is refused:
 * it can reach only one of the databases.
 */
export function resolveRouting(
  pool: unknown,
  dataLayer: DataLayer<unknown> | undefined,
  checkLayer: (layer: unknown, option: string) => DataLayer<unknown> | undefined,
): ResolvedRouting | undefined {
  if (!isRouting(pool)) return undefined;
  if (dataLayer !== undefined)
    throw new ConfigurationError(
      'dataLayer',
      'give each routed database its own (pool.databases.<name>.dataLayer)',
    );
  const entries = Object.entries(pool.databases as Record<string, unknown>);
  if (entries.length === 0)
    throw new ConfigurationError('pool.databases', 'must name at least one database');
  const databases = entries.map(([name, entry]): ResolvedDatabase => {
    const option = `pool.databases.${name}`;
    if (name.length === 0 || name.length > 63)
      throw new ConfigurationError(option, 'a database name has 1 to 63 characters');
    if (isPool(entry)) return { name, pool: entry, dataLayer: undefined };
    const given = (typeof entry === 'object' && entry !== null ? entry : {}) as {
      pool?: unknown;
      dataLayer?: unknown;
    };
    if (!isPool(given.pool)) throw new ConfigurationError(option, 'must be a pg Pool or { pool }');
    return {
      name,
      pool: given.pool,
      dataLayer: checkLayer(given.dataLayer, `${option}.dataLayer`),
    };
  });
  const pools = new Set(databases.map((d) => d.pool));
  if (pools.size !== databases.length)
    throw new ConfigurationError('pool.databases', 'each database needs a pool of its own');
  const layered = databases.filter((d) => d.dataLayer !== undefined).length;
  if (layered !== 0 && layered !== databases.length)
    throw new ConfigurationError(
      'pool.databases',
      'give every database a dataLayer or none: ctx.tx must have one type',
    );
  return {
    databases,
    route: pool.route.bind(pool),
    rememberKeys: intOption('pool.rememberKeys', pool.rememberKeys, 100_000, 0, 10_000_000),
  };
}

function isPool(value: unknown): value is Pool {
  return typeof (value as { connect?: unknown } | null)?.connect === 'function';
}
