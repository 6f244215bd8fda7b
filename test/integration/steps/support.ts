import { afterAll, afterEach, beforeAll } from '@jest/globals';
import { startProvider, type Provider } from '../../../kit/provider/provider.js';
import { createOrdersTable } from '../../../kit/steps/charge.js';
import {
  startStepsServer,
  type StepsServer,
  type StepsServerOptions,
} from '../../../kit/steps/server.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';

/** One schema and one provider per test file; servers a test starts are closed after it. */
export function stepsFixture(prefix: string): {
  db(): TestDatabase;
  provider(): Provider;
  start(options: Omit<StepsServerOptions, 'pool' | 'schema' | 'providerUrl'>): Promise<StepsServer>;
  orders(key: string): Promise<Array<{ id: number; charge_id: string | null }>>;
  flowRow(key: string): Promise<FlowRowView | undefined>;
} {
  let db: TestDatabase | undefined;
  let provider: Provider | undefined;
  const servers: StepsServer[] = [];
  beforeAll(async () => {
    db = await createTestDatabase(prefix, { max: 40 });
    provider = await startProvider();
    await createOrdersTable(db.pool);
  });
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.close();
  });
  afterAll(async () => {
    await provider?.close();
    await db?.close();
  });
  const get = (): TestDatabase => {
    if (db === undefined) throw new Error('no database yet');
    return db;
  };
  return {
    db: get,
    provider: () => {
      if (provider === undefined) throw new Error('no provider yet');
      return provider;
    },
    async start(options) {
      const server = await startStepsServer({
        ...options,
        pool: get().pool,
        schema: get().schema,
        providerUrl: provider?.url ?? '',
      });
      servers.push(server);
      return server;
    },
    async orders(key) {
      const { rows } = await get().pool.query<{ id: string; charge_id: string | null }>(
        'SELECT id, charge_id FROM orders WHERE flow_key = $1 ORDER BY id',
        [key],
      );
      return rows.map((r) => ({ id: Number(r.id), charge_id: r.charge_id }));
    },
    async flowRow(key) {
      const { rows } = await get().pool.query<FlowRowView>(
        `SELECT flow, fence::int AS fence, steps, status, body::text AS body, lease_until
         FROM eo_flows WHERE flow_key = $1`,
        [key],
      );
      return rows[0];
    },
  };
}

export interface FlowRowView {
  flow: string;
  fence: number;
  steps: Array<{ name: string; kind: string; result: string | null }>;
  status: number | null;
  body: string | null;
  lease_until: Date | null;
}

/** A response read whole. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** POSTs a JSON body with an Idempotency-Key. */
export async function postCharge(url: string, key: string, body: unknown): Promise<Answer> {
  const response = await fetch(`${url}/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  const headers: Record<string, string> = {};
  response.headers.forEach((v, k) => (headers[k] = v));
  return { status: response.status, headers, body: await response.text() };
}
