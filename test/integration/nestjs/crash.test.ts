import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { idempotentFetch } from '../../../src/client/index.js';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { TestQueues } from '../../helpers/sqs.js';
import { CHARGE_TABLES } from './child-app.js';
import { spawnNest, type NestChild, type NestChildOptions } from './spawn.js';

let db: TestDatabase;
let queues: TestQueues;
const children: NestChild[] = [];

beforeAll(async () => {
  db = await createTestDatabase('nest_crash');
  await db.pool.query(CHARGE_TABLES);
  queues = new TestQueues();
});
afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await queues.cleanup();
  await db.close();
});

function start(options: Omit<NestChildOptions, 'databaseUrl' | 'schema'>): NestChild {
  const child = spawnNest({ ...options, databaseUrl: databaseUrl(), schema: db.schema });
  children.push(child);
  return child;
}

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as net.AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

async function count(sql: string, value: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(sql, [value]);
  return rows[0]!.n;
}

describe.each(['express', 'fastify'] as const)('platform-%s: killed after COMMIT', (platform) => {
  it("the client's retry, to the restarted app, gets the committed answer, replayed", async () => {
    const port = await freePort();
    const first = start({ platform, port, kill: 'http' });
    await first.ready;
    const key = randomUUID();
    const call = idempotentFetch(
      `http://127.0.0.1:${port}/charges`,
      { method: 'POST' },
      {
        key,
        json: { customer: 'crash', amount: 9 },
        attempts: 60,
        deadlineMs: 60_000,
        backoff: { initialMs: 50, maxMs: 500 },
      },
    );
    // SIGKILLed in onCommitted: the charge committed, its answer never written.
    expect(await first.exited).toBe('SIGKILL');
    expect(first.lines).toContain(`committed ${key}`);
    const charges = 'SELECT count(*)::int AS n FROM charges WHERE idem_key = $1';
    expect(await count(charges, key)).toBe(1);

    const second = start({ platform, port });
    await second.ready;
    const result = await call;
    expect(result.response.status).toBe(201);
    expect(result.replayed).toBe(true);
    expect(await result.response.json()).toMatchObject({ customer: 'crash', amount: 9 });
    expect(second.lines.filter((l) => l.startsWith('committed'))).toEqual([]);
    expect(await count(charges, key)).toBe(1);
    await second.stop();
  });
});

describe('a consumer killed after COMMIT, before the ack', () => {
  it('the redelivery is a duplicate: acked, not applied again', async () => {
    const { url } = await queues.create('nest-crash', { visibilityTimeout: 2 });
    const first = start({ platform: 'express', queueUrl: url, kill: 'consumer' });
    await first.ready;
    const messageId = await queues.send(url, JSON.stringify({ id: 'killed' }));
    expect(await first.exited).toBe('SIGKILL');
    expect(first.lines).toContain(`processed ${messageId}`);
    const jobs = 'SELECT count(*)::int AS n FROM jobs_done WHERE id = $1';
    expect(await count(jobs, 'killed')).toBe(1);
    // Not acked: the message is still in the queue.
    expect((await queues.depth(url)).total).toBe(1);

    const second = start({ platform: 'express', queueUrl: url });
    await second.ready;
    for (;;) {
      if ((await queues.depth(url)).total === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(await count(jobs, 'killed')).toBe(1);
    expect(second.lines.filter((l) => l.startsWith('processed'))).toEqual([]);
    await second.stop();
  });
});
