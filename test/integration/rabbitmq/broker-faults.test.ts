/**
 * The RabbitMQ source when the broker side fails, on a node of this file's own (restarting
 * the shared one would break the other files): the connection dropped mid-handler (the
 * broker requeues the unacked message, the source reconnects, the redelivery is applied
 * once), and a broker restart mid-run (durable queues, persistent messages: all applied once).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startPrivateRabbitMq, type PrivateRabbitMq } from '../../../kit/services/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { counts, rabbitmqIntegration, recordEffect } from './harness.js';

let node: PrivateRabbitMq;
beforeAll(async () => {
  node = await startPrivateRabbitMq('rabbitmq-broker-faults');
}, 120_000);
afterAll(async () => {
  await node?.dispose();
}, 60_000);

const it_ = rabbitmqIntegration('broker_faults', () => node.url);

describe('RabbitMQ source when the broker fails', () => {
  it.each(['classic', 'quorum'] as const)(
    'redelivers a %s queue message whose connection dropped mid-handler, and applies it once',
    async (type) => {
      const queue = await it_.queue(type);
      await it_.send(queue, [{ body: { id: 'held' }, options: { messageId: `${queue}-held` } }]);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let calls = 0;
      const consumer = await it_.worker(
        { queue, prefetch: 1 },
        {
          handler: async (job, ctx) => {
            // The first attempt waits until its connection is gone, then commits.
            if (++calls === 1) await held;
            await recordEffect(ctx.tx, job.id, `call-${calls}`, ctx.attempt);
          },
        },
      );
      const errors: Error[] = [];
      consumer.on('error', (error) => errors.push(error));
      await waitFor(() => calls === 1, { what: 'the handler started' });
      await node.closeConnections();
      await waitFor(() => errors.length > 0, { what: 'the source saw its channel go' });
      release();
      // The COMMIT succeeds, its ack cannot go out on the dead channel; the broker
      // redelivers the message to the new channel, where it is a duplicate.
      await waitFor(() => consumer.stats().duplicates >= 1, {
        what: 'the redelivery, a duplicate',
        timeoutMs: 30_000,
      });
      await waitFor(async () => (await it_.depth(queue)) === 0, { what: 'an empty queue' });
      expect(consumer.stats().ackFailures).toBe(1);
      expect(consumer.stats().processed).toBe(1);
      expect((await it_.effects()).map((e) => e.id)).toEqual(['held']);
    },
    90_000,
  );

  it('applies every message once across a broker restart mid-run', async () => {
    const queue = await it_.queue('quorum');
    const total = 200;
    await it_.send(
      queue,
      Array.from({ length: total }, (_, i) => ({
        body: { id: `r${i}` },
        options: { messageId: `${queue}-${i}` },
      })),
    );
    const consumer = await it_.worker(
      { queue, prefetch: 5 },
      {
        handler: async (job, ctx) => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          await recordEffect(ctx.tx, job.id, 'w', ctx.attempt);
        },
      },
    );
    consumer.on('error', () => undefined);
    await waitFor(async () => (await it_.effects()).length >= 20, { what: '20 effects' });
    await node.stop('SIGTERM');
    await node.start();
    await waitFor(async () => counts(await it_.effects()).size === total, {
      what: `all ${total} ids applied`,
      timeoutMs: 90_000,
    });
    await waitFor(async () => (await it_.depth(queue)) === 0, { what: 'an empty queue' });
    const doubled = [...counts(await it_.effects())].filter(([, n]) => n > 1);
    expect(doubled).toEqual([]);
  }, 180_000);
});
