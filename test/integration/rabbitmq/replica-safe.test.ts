/**
 * `replicaSafe` through the RabbitMQ source, on a primary with an asynchronous standby
 * whose replication link can stall (kit/services/cluster): the source's `basic.ack`
 * must wait for the standby as the other sources' acks do, and a wait given up on
 * (`onLag: 'hold'`, past `maxWaitMs`) must come back through a delay queue without
 * spending an attempt, its redelivery a duplicate acked once the standby has the claim.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import amqp, { type ChannelModel } from 'amqplib';
import { createConsumer, type Consumer, type ReplicaSafeOptions } from '../../../src/index.js';
import { rabbitmqSource, type AmqpConnectionLike } from '../../../adapters/rabbitmq/index.js';
import type { FailoverCluster } from '../../../kit/services/cluster/cluster.js';
import type { TestDatabase } from '../../helpers/db.js';
import { sleep, waitFor } from '../../helpers/wait-for.js';
import { schemaOn, startCluster } from '../failover/support.js';
import { recordEffect, type Job } from './effects.js';
import { rabbitmqUrl, unique } from './harness.js';

let cluster: FailoverCluster;
let db: TestDatabase;
let admin: ChannelModel;
const consumers: Consumer[] = [];

beforeAll(async () => {
  cluster = await startCluster('async');
  db = await schemaOn(cluster.url, 'rmq_replica');
  await db.pool.query(
    'CREATE TABLE effects (n bigserial PRIMARY KEY, id text NOT NULL, worker text NOT NULL, attempt int NOT NULL)',
  );
  await cluster.standbyReady();
  admin = await amqp.connect(rabbitmqUrl());
}, 180_000);
afterEach(async () => {
  cluster.link.unstall();
  await Promise.all(consumers.splice(0).map((c) => c.stop({ timeoutMs: 5_000 })));
});
afterAll(async () => {
  await admin?.close().catch(() => undefined);
  await db?.close();
  await cluster?.stop();
});

/** The delivery tags the source acked, in order (its channels' `ack`, as the broker receives it). */
function recordingAcks(connection: AmqpConnectionLike, acked: number[]): AmqpConnectionLike {
  return {
    async createChannel() {
      const channel = await connection.createChannel();
      const ack = channel.ack.bind(channel);
      channel.ack = (message, allUpTo) => {
        acked.push(message.fields.deliveryTag);
        ack(message, allUpTo);
      };
      return channel;
    },
    createConfirmChannel: () => connection.createConfirmChannel(),
    close: () => connection.close(),
  };
}

async function start(queue: string, replicaSafe: ReplicaSafeOptions, acked: number[]) {
  const consumer = createConsumer<Job>({
    name: unique('replica'),
    pool: db.pool,
    schema: db.schema,
    replicaSafe,
    // The retry of an unconfirmed wait comes back after 100 ms (one delay step).
    backoff: { initialMs: 100, maxMs: 100 },
    source: rabbitmqSource<Job>({
      connection: recordingAcks(admin, acked),
      queue,
      reconnectBackoff: { initialMs: 100, maxMs: 1000 },
    }),
    handler: async (job, ctx) => {
      await recordEffect(ctx.tx, job.id, 'w', ctx.attempt);
    },
  });
  consumers.push(consumer);
  await consumer.start();
  return consumer;
}

async function classicQueue(): Promise<string> {
  const name = unique('replica');
  const channel = await admin.createChannel();
  await channel.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'classic' } });
  await channel.close();
  return name;
}

async function send(queue: string, id: string): Promise<void> {
  const channel = await admin.createConfirmChannel();
  channel.sendToQueue(queue, Buffer.from(JSON.stringify({ id })), {
    persistent: true,
    messageId: id,
  });
  await channel.waitForConfirms();
  await channel.close();
}

async function applied(id: string): Promise<number> {
  const { rows } = await db.pool.query('SELECT 1 FROM effects WHERE id = $1', [id]);
  return rows.length;
}

describe('rabbitmqSource with replicaSafe', () => {
  it('acks only once the standby has the claim', async () => {
    const queue = await classicQueue();
    const acked: number[] = [];
    await start(queue, { maxWaitMs: 60_000 }, acked);
    const id = unique('m');
    cluster.link.stall();
    await send(queue, id);
    await waitFor(async () => (await applied(id)) === 1, { what: 'the commit' });
    await sleep(500);
    expect(acked).toEqual([]);
    cluster.link.unstall();
    await waitFor(() => acked.length === 1, { what: 'the ack', timeoutMs: 30_000 });
    expect(await applied(id)).toBe(1);
  }, 120_000);

  it("under 'hold', a wait given up on is retried without spending an attempt, then acked as a duplicate", async () => {
    const queue = await classicQueue();
    const acked: number[] = [];
    const consumer = await start(queue, { maxWaitMs: 300, onLag: 'hold' }, acked);
    const failed: Array<{ code: string; attempt: number; willRetry: boolean }> = [];
    const duplicates: number[] = [];
    consumer.on('failed', (e) =>
      failed.push({ code: e.error.code, attempt: e.attempt, willRetry: e.willRetry }),
    );
    consumer.on('duplicate', (e) => duplicates.push(e.attempt));
    const id = unique('m');
    cluster.link.stall();
    await send(queue, id);
    await waitFor(() => failed.length >= 1, { what: 'the unconfirmed wait', timeoutMs: 30_000 });
    expect(failed[0]).toEqual({ code: 'EO_COMMIT_UNKNOWN', attempt: 1, willRetry: true });
    cluster.link.unstall();
    await waitFor(() => duplicates.length === 1, { what: 'the duplicate', timeoutMs: 30_000 });
    // The copy in the delay queue kept eo-attempt 1: the standby's lag spent no attempt.
    expect(duplicates).toEqual([1]);
    expect(failed.every((f) => f.attempt === 1)).toBe(true);
    expect(await applied(id)).toBe(1);
    await waitFor(async () => (await depth(queue)) === 0, { what: 'an empty queue' });
    // The original (acked once its copy was confirmed) and the copy: one ack each.
    expect(acked).toHaveLength(failed.length + 1);
  }, 120_000);
});

async function depth(queue: string): Promise<number> {
  const channel = await admin.createChannel();
  try {
    return (await channel.checkQueue(queue)).messageCount;
  } finally {
    await channel.close();
  }
}
