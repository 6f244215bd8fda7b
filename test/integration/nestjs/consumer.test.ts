import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, databaseUrl, type TestDatabase } from '../../helpers/db.js';
import { TestQueues } from '../../helpers/sqs.js';
import { CHARGE_TABLES } from './child-app.js';
import { spawnNest, type NestChild } from './spawn.js';

let db: TestDatabase;
let queues: TestQueues;
const children: NestChild[] = [];

beforeAll(async () => {
  db = await createTestDatabase('nest_consumer');
  await db.pool.query(CHARGE_TABLES);
  queues = new TestQueues();
});
afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await queues.cleanup();
  await db.close();
});

function start(queueUrl: string, kill?: 'consumer'): NestChild {
  const child = spawnNest({
    platform: 'express',
    databaseUrl: databaseUrl(),
    schema: db.schema,
    queueUrl,
    ...(kill === undefined ? {} : { kill }),
  });
  children.push(child);
  return child;
}

async function done(id: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM jobs_done WHERE id = $1',
    [id],
  );
  return rows[0]!.n;
}

/** Waits until the queue holds nothing (every message deleted, i.e. acked). */
async function drained(url: string): Promise<void> {
  for (;;) {
    if ((await queues.depth(url)).total === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('a @OnceHandler consumer run by EffectivelyOnceModule over SQS', () => {
  it('starts with the application and applies each message once', async () => {
    const { url } = await queues.create('nest-jobs');
    const child = start(url);
    await child.ready;
    const ids = ['a1', 'a2', 'a3'];
    const sent = await Promise.all(ids.map((id) => queues.send(url, JSON.stringify({ id }))));
    await Promise.all(sent.map((messageId) => child.line(`processed ${messageId}`)));
    for (const id of ids) expect(await done(id)).toBe(1);
    await drained(url);
    expect(await child.stop()).toBe('SIGTERM');
  });

  it('on SIGTERM, lets the delivery in flight commit and be acked before the app closes', async () => {
    const { url } = await queues.create('nest-drain', { visibilityTimeout: 60 });
    const child = start(url);
    await child.ready;
    const messageId = await queues.send(url, JSON.stringify({ id: 'inflight', holdMs: 1500 }));
    await child.line('handling inflight');
    // Shut down with the delivery mid-handler: Nest's hooks stop the consumer gracefully.
    expect(await child.stop()).toBe('SIGTERM');
    const processed = child.lines.indexOf(`processed ${messageId}`);
    expect(processed).toBeGreaterThanOrEqual(0);
    expect(child.lines.indexOf('closed')).toBeGreaterThan(processed);
    expect(await done('inflight')).toBe(1);
    // Acked: nothing left to redeliver (the visibility timeout is a minute away).
    expect((await queues.depth(url)).total).toBe(0);
  });
});
