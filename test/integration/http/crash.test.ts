import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { idempotentFetch } from 'effectively-once/client';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { FRAMEWORKS, PAYMENT_TABLES } from '../../../kit/payments/payments.js';
import { spawnPaymentServer, type PaymentProcess } from '../../../kit/payments/spawn.js';

let db: TestDatabase;
const children: PaymentProcess[] = [];

beforeAll(async () => {
  db = await createTestDatabase('http_crash');
  await db.pool.query(PAYMENT_TABLES);
});

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await db.close();
});

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

function start(options: Parameters<typeof spawnPaymentServer>[0]): PaymentProcess {
  const child = spawnPaymentServer(options);
  children.push(child);
  return child;
}

describe.each(FRAMEWORKS)('%s: the server process dies right after COMMIT', (framework) => {
  it("the client's retry, to the restarted server, gets the original response, replayed", async () => {
    const port = await freePort();
    const settings = { framework, databaseUrl: databaseUrl(), schema: db.schema, port };
    const first = start({ ...settings, killAfterCommits: 1 });
    expect(await first.ready).toBe(port);

    const key = randomUUID();
    const call = idempotentFetch(
      `http://127.0.0.1:${port}/charges`,
      { method: 'POST', headers: { 'x-tenant': 'crash' } },
      {
        key,
        json: { customerId: 'cus_crash', amountCents: 777 },
        attempts: 60,
        deadlineMs: 60_000,
        backoff: { initialMs: 50, maxMs: 500 },
      },
    );
    // SIGKILLed from onCommitted: the charge is committed, its response never written.
    expect(await first.exited).toBe('SIGKILL');
    expect(first.committed).toEqual([key]);
    const { rows } = await db.pool.query<{ id: string }>(
      'SELECT id FROM charges WHERE idem_key = $1',
      [key],
    );
    expect(rows).toHaveLength(1);

    // The same server comes back on the same port; the client is still retrying.
    const second = start(settings);
    await second.ready;
    const result = await call;
    expect(result.response.status).toBe(201);
    expect(result.replayed).toBe(true);
    expect(result.attempts).toBeGreaterThan(1);
    expect(result.response.headers.get('location')).toBe(`/charges/${rows[0]?.id}`);
    expect(await result.response.json()).toEqual({
      id: rows[0]?.id,
      tenant: 'crash',
      customerId: 'cus_crash',
      amountCents: 777,
      key,
    });
    expect(second.committed).toEqual([]);
    const count = await db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM charges WHERE idem_key = $1',
      [key],
    );
    expect(count.rows[0]?.n).toBe(1);
    await second.stop();
  });
});
