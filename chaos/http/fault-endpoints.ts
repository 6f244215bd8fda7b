import { chaosReplicaSafe } from '../failover/replica-safe.js';
import pg from 'pg';
import {
  createIdempotency,
  DEFAULT_STORED_HEADERS,
  headerSource,
  type CommittedEvent,
  type Idempotency,
  type WebhookOptions,
} from 'effectively-once/http';
import { FAULT_TIMEOUT_MS } from './fault-plan.js';
import { ANSWER_HEADER } from './fault-side.js';

/** The fault routes' key table (the payment API keeps its own, eo_idempotency_keys). */
export const FAULT_KEY_TABLE = 'fault_keys';

/**
 * Two key tables whose names share their first 56 bytes (the longest name Postgres keeps
 * is 63): names derived from them by truncation (functions, indexes) must still differ.
 */
export const LONG_TABLE_PREFIX = 'idempotency_keys_of_the_payments_service_for_the_tenant_';
export const LONG_TABLES = {
  alpha: `${LONG_TABLE_PREFIX}alpha`,
  bravo: `${LONG_TABLE_PREFIX}bravo`,
};

/** The endpoints the fault routes use. */
export interface FaultEndpoints {
  /** Every route but the two below: scoped by `x-tenant`, timeout FAULT_TIMEOUT_MS. */
  main: Idempotency;
  /** The same on a pool of one connection (`saturated-pool`). */
  saturated: Idempotency;
  /** One key table each (`long-names`). */
  alpha: Idempotency;
  bravo: Idempotency;
  /** A sender that numbers deliveries per account (`x-delivery-id`). */
  webhook: WebhookOptions;
  close(): Promise<void>;
}

export function createFaultEndpoints(options: {
  pool: pg.Pool;
  databaseUrl: string;
  schema: string;
  onCommitted: (event: CommittedEvent) => void;
}): FaultEndpoints {
  const { pool, schema, onCommitted } = options;
  const single = new pg.Pool({
    connectionString: options.databaseUrl,
    options: `-c search_path=${schema}`,
    max: 1,
  });
  single.on('error', () => undefined);
  const endpoint = (table: string, on: pg.Pool): Idempotency =>
    createIdempotency({
      pool: on,
      schema,
      table,
      scope: (request) => request.headers.get('x-tenant') ?? 't0',
      // The route a key is bound to: the two long-name endpoints are one API's, per tenant.
      route: (request) => new URL(request.url).pathname.replace(/\/long\/(alpha|bravo)$/, '/long'),
      storeHeaders: [...DEFAULT_STORED_HEADERS, ANSWER_HEADER],
      handlerTimeoutMs: FAULT_TIMEOUT_MS,
      onCommitted,
      replicaSafe: chaosReplicaSafe(),
    });
  const main = endpoint(FAULT_KEY_TABLE, pool);
  const saturated = endpoint(FAULT_KEY_TABLE, single);
  const alpha = endpoint(LONG_TABLES.alpha, pool);
  const bravo = endpoint(LONG_TABLES.bravo, pool);
  return {
    main,
    saturated,
    alpha,
    bravo,
    webhook: {
      source: headerSource('accounts', 'x-delivery-id'),
      verify: (request) => request.headers.get('x-test-signature') === 'ok',
    },
    close: async () => {
      await Promise.all([main, saturated, alpha, bravo].map((i) => i.close({ timeoutMs: 1000 })));
      await single.end().catch(() => undefined);
    },
  };
}
