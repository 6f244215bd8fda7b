import { parseArgs } from 'node:util';
import type { Framework } from '../../kit/payments/payments.js';
import { choiceOption, intOption, listOption, numberOption, UsageError } from '../../kit/args.js';
import { DATA_LAYERS, type DataLayerName } from '../../kit/data-layers/index.js';
import { failoverArgs } from '../failover/args.js';
import type { Replication } from '../../kit/services/cluster/node.js';
import { HTTP_FAULT_KINDS, type HttpFaultKind } from './fault-plan.js';

/** What one HTTP chaos run does; see `httpUsage()`. */
export interface HttpChaosArgs {
  target: 'http';
  /** The payment server's framework (the test payment API on effectively-once/http). */
  framework: Framework;
  /** Logical payments, each with one idempotency key reused on every retry. */
  payments: number;
  /** Payments in flight at once (each one an idempotentFetch caller). */
  clients: number;
  /** Share of payments sent by a second caller at the same time, same key and bytes. */
  duplicateRatio: number;
  /** SIGKILLs of the server process (half right after a COMMIT, half at a random moment). */
  kills: number;
  /** `pg_terminate_backend` of every server connection, at spread-out moments. */
  pgTerminations: number;
  /** Postgres crash-restarts. */
  pgRestarts: number;
  /** Shares of request/response exchanges the proxy drops, resets or delays. */
  drop: number;
  reset: number;
  delay: number;
  /** idempotentFetch's `attemptTimeoutMs`; a delayed answer is held longer than this. */
  attemptTimeoutMs: number;
  /** Faulty operations (fault-plan.ts), spread evenly over `faultKinds`; 0: none. */
  handlerFaults: number;
  faultKinds: HttpFaultKind[];
  seed: number;
  timeoutMs: number;
  /** Postgres failovers (chaos/failover/): the server reaches a primary with a standby through a proxy. */
  failovers: number;
  /** The failover cluster's replication (`sync` unless `--replication async`). */
  replication: Replication;
  /** Keep the run's schema after a successful run. */
  keep: boolean;
  /**
   * What the payment handler writes through: `pg` (the payment API of kit/payments) or a
   * data layer (chaos/http/layer-payments.ts: Fastify, the charge through the layer).
   */
  dataLayer: DataLayerName;
}

export function httpUsage(): string {
  return `usage: tsx chaos/main.ts --target http [options]

A payment server (effectively-once/http) in a child process, callers using
idempotentFetch through a fault-injecting TCP proxy, the server SIGKILLed and
restarted, its Postgres connections terminated, Postgres crash-restarted.

  --payments N        logical payments, one idempotency key each (default 1000)
  --clients C         payments in flight at once (default 16)
  --duplicates R      share of payments also sent by a second, concurrent caller with
                      the same key and bytes, 0 to 1 (default 0.1)
  --kills K           server SIGKILLs, alternately right after a COMMIT (before the
                      response is written) and at a random moment (default 6)
  --pg-terminations T pg_terminate_backend of all the server's connections (default 4)
  --pg-restarts R     Postgres crash-restarts (default 1)
  --drop F            share of exchanges whose response the proxy drops (default 0.1)
  --reset F           share of exchanges reset before the request arrives (default 0.05)
  --delay F           share of exchanges whose response is held past the client's
                      attempt timeout (default 0.03)
  --attempt-timeout MS
                      idempotentFetch attemptTimeoutMs (default 1500)
  --framework F       hono, express or fastify: the payment API's (default fastify)
  --handler-faults F  faulty operations on the handler-fault routes (Express and
                      Fastify), spread evenly over the kinds, at least 2 per kind
                      (default N/10, at least 20; 0 turns them off)
  --fault-kinds LIST  comma-separated, of stream, callback, throw-after, deferred,
                      backend-killed, ignore-signal, saturated-pool, floating,
                      webhook-scope, long-names (default all; see chaos/README.md)
  --failovers N       Postgres failovers: the server reaches a primary with a streaming
                      standby through a proxy; the primary is SIGKILLed, the standby
                      promoted, the proxy moved; the first right after a COMMIT was
                      answered, before the server heard it (default 0)
  --replication MODE  sync (default) or async: with async, answered payments whose
                      charge vanished with the old primary are window_lost= and do not
                      fail the run (needs --handler-faults 0)
  --seed S            seed of the plan and the proxy's faults (default: random)
  --timeout SECONDS   fail when the payments are not all answered by then
                      (default 120 + N/20)
  --keep              keep the chaos schema after a successful run
  --data-layer NAME   what POST /charges writes through: pg (default: the payment API,
                      ctx.tx a pg client) or a data layer, ctx.tx its transaction object:
                      ${DATA_LAYERS.slice(1).join(', ')}. With a layer the payment API is
                      Fastify's (--framework fastify only) and the handler-fault routes,
                      written on a pg ctx.tx, are off (--handler-faults 0 only)

Postgres is started privately unless DATABASE_URL is set (then it is not restarted).`;
}

const FRAMEWORKS: readonly Framework[] = ['hono', 'express', 'fastify'];

export function parseHttpChaosArgs(argv: string[]): HttpChaosArgs {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      target: { type: 'string' },
      payments: { type: 'string' },
      clients: { type: 'string' },
      duplicates: { type: 'string' },
      kills: { type: 'string' },
      'pg-terminations': { type: 'string' },
      'pg-restarts': { type: 'string' },
      drop: { type: 'string' },
      reset: { type: 'string' },
      delay: { type: 'string' },
      'attempt-timeout': { type: 'string' },
      framework: { type: 'string' },
      'handler-faults': { type: 'string' },
      'fault-kinds': { type: 'string' },
      seed: { type: 'string' },
      timeout: { type: 'string' },
      failovers: { type: 'string' },
      replication: { type: 'string' },
      keep: { type: 'boolean' },
      'data-layer': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help === true) throw new UsageError('');
  if (values.target !== 'http') throw new UsageError('--target must be http');
  const framework = (values.framework ?? 'fastify') as Framework;
  if (!FRAMEWORKS.includes(framework))
    throw new UsageError(`--framework must be one of ${FRAMEWORKS.join(', ')}`);
  const payments = intOption('payments', values.payments, 1000, 1, 1_000_000);
  // Every kill is planned at a commit count below N, so each one can happen.
  const kills = intOption('kills', values.kills, 6, 0, Math.max(0, Math.floor(payments / 4)));
  const drop = numberOption('drop', values.drop, 0.1, 0, 1);
  const reset = numberOption('reset', values.reset, 0.05, 0, 1);
  const delay = numberOption('delay', values.delay, 0.03, 0, 1);
  if (drop + reset + delay > 0.9) throw new UsageError('--drop + --reset + --delay must be <= 0.9');
  const dataLayer = choiceOption('data-layer', values['data-layer'], DATA_LAYERS, 'pg');
  if (dataLayer !== 'pg' && framework !== 'fastify')
    throw new UsageError(
      `--data-layer ${dataLayer}: the payment API written through a layer is Fastify's (--framework fastify)`,
    );
  const handlerFaults = intOption(
    'handler-faults',
    values['handler-faults'],
    dataLayer === 'pg' ? Math.max(20, Math.round(payments / 10)) : 0,
    0,
    100_000,
  );
  if (dataLayer !== 'pg' && handlerFaults > 0)
    throw new UsageError(
      `--data-layer ${dataLayer} needs --handler-faults 0: the handler-fault routes write through a pg ctx.tx`,
    );
  const { failovers, replication } = failoverArgs(values.failovers, values.replication);
  // The async window is accounted on the payments' charges only.
  if (replication === 'async' && handlerFaults > 0)
    throw new UsageError('--replication async needs --handler-faults 0');
  return {
    failovers,
    replication,
    target: 'http',
    framework,
    payments,
    clients: intOption('clients', values.clients, 16, 1, 1000),
    duplicateRatio: numberOption('duplicates', values.duplicates, 0.1, 0, 1),
    kills,
    pgTerminations: intOption('pg-terminations', values['pg-terminations'], 4, 0, 1000),
    pgRestarts: intOption('pg-restarts', values['pg-restarts'], 1, 0, 10),
    drop,
    reset,
    delay,
    attemptTimeoutMs: intOption('attempt-timeout', values['attempt-timeout'], 1500, 100, 60_000),
    handlerFaults,
    faultKinds: listOption('fault-kinds', values['fault-kinds'], HTTP_FAULT_KINDS),
    seed: intOption('seed', values.seed, Math.floor(Math.random() * 2 ** 31), 0, 2 ** 32 - 1),
    timeoutMs:
      intOption('timeout', values.timeout, Math.ceil(120 + payments / 20), 1, 86_400) * 1000,
    keep: values.keep === true,
    dataLayer,
  };
}
