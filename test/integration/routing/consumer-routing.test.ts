/**
 * Issue 36, part 2: a consumer whose `pool` is a Routing over three private Postgres
 * clusters (each key claimed, and its effect written, in the shard its hash names), fed
 * by the SQS emulator (EO_SERVICES=postgres,sqs). Concurrent duplicates of a key meet in
 * their shard and apply once; a crashed shard's keys retry as infrastructure (no attempt
 * spent, maxAttempts 1) while the other shards' keys commit, and apply once it is back;
 * a route that changes its mind about a key is refused; each shard's outbox rows are
 * published by that shard's own relay.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import {
  createConsumer,
  type Consumer,
  type ConsumerOptions,
  type EffectivelyOnceError,
} from '../../../src/index.js';
import { createRelay, enqueue, migrateOutbox, type Relay } from '../../../src/outbox/index.js';
import { sqsSource } from '../../../adapters/sqs/index.js';
import { TestQueues } from '../../helpers/sqs.js';
import { waitFor } from '../../helpers/wait-for.js';
import { Shards, type Shard } from './shards.js';

const TIMEOUT = 120_000;
let shards: Shards;
let queues: TestQueues;
const running: Array<Consumer | Relay> = [];

interface Job {
  id: string;
}

beforeAll(async () => {
  shards = await Shards.start(3);
  queues = new TestQueues();
  for (const s of shards.all) {
    await s.pool.query('CREATE TABLE effects (id text NOT NULL, shard text NOT NULL)');
    await migrateOutbox(s.pool);
  }
}, TIMEOUT);
afterEach(async () => {
  for (const r of running.splice(0)) await r.stop();
  for (const s of shards.all) await s.pool.query('TRUNCATE effects').catch(() => undefined);
});
afterAll(async () => {
  await queues?.cleanup();
  await shards?.stop();
});

async function send(url: string, ids: readonly string[]): Promise<void> {
  for (let i = 0; i < ids.length; i += 10)
    await queues.client.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: ids.slice(i, i + 10).map((id, j) => ({
          Id: String(j),
          MessageBody: JSON.stringify({ id }),
        })),
      }),
    );
}

/** A consumer over the three shards: its effect names the shard it was written in. */
function worker(url: string, name: string, options: Partial<ConsumerOptions<Job>> = {}): Consumer {
  const consumer = createConsumer<Job>({
    name,
    pool: shards.routing(),
    source: sqsSource<Job>({
      client: queues.client,
      queueUrl: url,
      waitTimeSeconds: 1,
      key: (m) => (JSON.parse(m.Body ?? '{}') as Job).id,
    }),
    backoff: { initialMs: 10, maxMs: 50 },
    busyRetryDelayMs: 20,
    handler: async (job, ctx) => {
      const tx: PoolClient = ctx.tx;
      const { rows } = await tx.query<{ port: number }>(
        "SELECT current_setting('port')::int AS port",
      );
      const shard = shards.all.find((s) => s.state.port === rows[0]!.port)!;
      await tx.query('INSERT INTO effects (id, shard) VALUES ($1, $2)', [job.id, shard.name]);
      await enqueue(tx, { destination: 'out', payload: { id: job.id } });
    },
    ...options,
  });
  running.push(consumer);
  return consumer;
}

/** Every effect in every shard: id → the shards it was written in. */
async function effects(): Promise<Map<string, string[]>> {
  const seen = new Map<string, string[]>();
  for (const s of shards.all) {
    const { rows } = await s.pool.query<{ id: string; shard: string }>(
      'SELECT id, shard FROM effects',
    );
    for (const r of rows) seen.set(r.id, [...(seen.get(r.id) ?? []), r.shard]);
  }
  return seen;
}

async function claimsIn(shard: Shard, consumer: string): Promise<string[]> {
  const { rows } = await shard.pool.query<{ message_key: string }>(
    'SELECT message_key FROM processed_messages WHERE consumer = $1',
    [consumer],
  );
  return rows.map((r) => r.message_key);
}

describe('a consumer routed over three Postgres clusters', () => {
  it(
    'applies concurrent duplicates once, in the shard the route names, and each relay publishes its own',
    async () => {
      const { url } = await queues.create('routing-dups', { visibilityTimeout: 30 });
      const ids = Array.from({ length: 60 }, (_, i) => `dup-${i}-${randomUUID()}`);
      // Every message twice, taken by two workers at once.
      await send(url, [...ids, ...ids]);
      const a = worker(url, 'routed', { concurrency: 8 });
      const b = worker(url, 'routed', { concurrency: 8 });
      await Promise.all([a.start(), b.start()]);
      await waitFor(async () => (await effects()).size === ids.length, { timeoutMs: 60_000 });
      await waitFor(() => a.stats().duplicates + b.stats().duplicates === ids.length, {
        timeoutMs: 60_000,
      });
      const seen = await effects();
      for (const id of ids) expect(seen.get(id)).toEqual([shards.shardOf(id).name]);
      for (const s of shards.all) {
        const mine = ids.filter((id) => shards.shardOf(id) === s).sort();
        expect((await claimsIn(s, 'routed')).sort()).toEqual(mine);
      }
      // Every shard got some keys: the test would prove nothing with one.
      for (const s of shards.all) expect((await claimsIn(s, 'routed')).length).toBeGreaterThan(0);

      // The relay runs per database: each shard's own relay publishes that shard's rows.
      const published = new Map<string, string[]>();
      for (const s of shards.all) {
        const relay = createRelay({
          pool: s.pool,
          publishers: {
            out: {
              publish: async (records) => {
                const list = published.get(s.name) ?? [];
                for (const r of records)
                  list.push((JSON.parse(r.payload.toString('utf8')) as Job).id);
                published.set(s.name, list);
              },
            },
          },
          pollIntervalMs: 50,
          listen: false,
        });
        running.push(relay);
        await relay.start();
      }
      await waitFor(() => [...published.values()].flat().length === ids.length, {
        timeoutMs: 30_000,
      });
      for (const s of shards.all)
        expect((published.get(s.name) ?? []).sort()).toEqual(
          ids.filter((id) => shards.shardOf(id) === s).sort(),
        );
    },
    TIMEOUT,
  );

  it(
    'keeps committing the other shards while one is down; its keys retry as infrastructure and apply once it is back',
    async () => {
      const { url } = await queues.create('routing-down', { visibilityTimeout: 5 });
      const down = shards.all[2]!;
      const consumer = worker(url, 'down-test', { concurrency: 8, maxAttempts: 1 });
      await consumer.start();
      await shards.crash(down);
      try {
        const ids = Array.from({ length: 45 }, (_, i) => `down-${i}-${randomUUID()}`);
        await send(url, ids);
        const alive = ids.filter((id) => shards.shardOf(id) !== down);
        const held = ids.filter((id) => shards.shardOf(id) === down);
        expect(held.length).toBeGreaterThan(0);
        const aliveApplied = async (): Promise<boolean> => {
          const seen = new Map<string, string[]>();
          for (const s of shards.all.filter((x) => x !== down)) {
            const { rows } = await s.pool.query<{ id: string; shard: string }>(
              'SELECT id, shard FROM effects',
            );
            for (const r of rows) seen.set(r.id, [...(seen.get(r.id) ?? []), r.shard]);
          }
          return alive.every((id) => seen.get(id)?.length === 1);
        };
        await waitFor(aliveApplied, { timeoutMs: 60_000 });
        // The down shard's keys failed as infrastructure: retried, no attempt spent.
        await waitFor(() => consumer.stats().retried > 0, { timeoutMs: 30_000 });
        expect(consumer.stats().deadLettered).toBe(0);
        await shards.restart(down);
        await waitFor(async () => (await effects()).size === ids.length, { timeoutMs: 90_000 });
        const seen = await effects();
        for (const id of ids) expect(seen.get(id)).toEqual([shards.shardOf(id).name]);
        expect(consumer.stats().deadLettered).toBe(0);
      } finally {
        await shards.restart(down).catch(() => undefined);
      }
    },
    TIMEOUT,
  );

  it(
    'refuses a key whose route changed its mind, and claims it nowhere else',
    async () => {
      const { url } = await queues.create('routing-flip', { visibilityTimeout: 2 });
      const routing = shards.routing();
      const answers = ['shard-0', 'shard-1'];
      let calls = 0;
      const failures: EffectivelyOnceError[] = [];
      const consumer = worker(url, 'flip', {
        // A route that is not a function of the key: the first delivery's answer and the
        // redelivery's differ.
        pool: { ...routing, route: () => answers[Math.min(calls++, 1)]! },
        handler: async () => {
          throw new Error('first attempt fails, so the key is delivered again');
        },
        maxAttempts: 3,
      });
      consumer.on('failed', (e) => failures.push(e.error));
      await consumer.start();
      await send(url, ['flip-1']);
      await waitFor(() => failures.some((e) => e.code === 'EO_ROUTING_VIOLATION'), {
        timeoutMs: 30_000,
      });
      expect(await claimsIn(shards.all[1]!, 'flip')).toEqual([]);
    },
    TIMEOUT,
  );
});
