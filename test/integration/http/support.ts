import { afterAll, afterEach, beforeAll } from '@jest/globals';
import type { IdempotencyTelemetry } from 'effectively-once/http';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import {
  startPaymentServer,
  type PaymentServer,
  type PaymentServerOptions,
} from '../../../kit/payments/payments.js';

/** One schema per test file; servers started by a test are closed after it. */
export function paymentFixture(prefix: string): {
  db: () => TestDatabase;
  start(options: Omit<PaymentServerOptions, 'pool' | 'schema'>): Promise<PaymentServer>;
  effects(key: string): Promise<number>;
  deliveries(sender: string, id: string): Promise<number>;
} {
  let db: TestDatabase | undefined;
  const servers: PaymentServer[] = [];
  beforeAll(async () => {
    db = await createTestDatabase(prefix, { max: 40 });
  });
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.close();
  });
  afterAll(async () => {
    await db?.close();
  });
  const get = (): TestDatabase => {
    if (db === undefined) throw new Error('no database yet');
    return db;
  };
  return {
    db: get,
    async start(options) {
      const server = await startPaymentServer({
        ...options,
        pool: get().pool,
        schema: get().schema,
      });
      servers.push(server);
      return server;
    },
    async effects(key) {
      const { rows } = await get().pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM charges WHERE idem_key = $1',
        [key],
      );
      return rows[0]?.n ?? -1;
    },
    async deliveries(sender, id) {
      const { rows } = await get().pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM deliveries WHERE sender = $1 AND delivery_id = $2',
        [sender, id],
      );
      return rows[0]?.n ?? -1;
    },
  };
}

/** A response read whole, for comparing answers byte for byte. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export async function answer(response: Response): Promise<Answer> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  return { status: response.status, headers, body: await response.text() };
}

/** POSTs JSON with a key (and a tenant), with the global fetch. */
export async function post(
  url: string,
  key: string | undefined,
  body: unknown,
  extra: Record<string, string> = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...extra };
  if (key !== undefined) headers['idempotency-key'] = key;
  return answer(
    await fetch(url, {
      method: 'POST',
      headers,
      body: typeof body === 'string' ? body : JSON.stringify(body),
    }),
  );
}

/**
 * Telemetry that counts the requests that reached the claim's doorstep (key, body and
 * scope read): what a test waits on before releasing an original held in its handler.
 */
export function arrivals(): { telemetry: IdempotencyTelemetry; count: () => number } {
  let seen = 0;
  return {
    telemetry: {
      startRequest: () => ({
        run: (fn) => fn(),
        identified: () => void seen++,
        end: () => undefined,
      }),
    },
    count: () => seen,
  };
}

/** A promise and its resolver. */
export function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

/** The headers that differ per response whatever the server stored. */
export function stable(a: Answer): Answer {
  const { date: _d, 'keep-alive': _k, connection: _c, ...headers } = a.headers;
  return { ...a, headers };
}
