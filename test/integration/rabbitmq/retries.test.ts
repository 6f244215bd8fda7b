/**
 * Retries and dead letters on a real node: a failing handler's message goes through the
 * delay queues (queue TTL, dead-lettered back to the work queue), not back to the queue's
 * head, so the messages behind it run meanwhile; its attempt grows with each retry (the
 * eo-attempt header; on quorum queues plus x-delivery-count), and after maxAttempts it is
 * published to the dead-letter exchange with why.
 */
import { describe, expect, it } from '@jest/globals';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, rabbitmqIntegration, recordEffect } from './harness.js';

const it_ = rabbitmqIntegration('retries');

describe.each(['classic', 'quorum'] as const)('RabbitMQ retries on a %s queue', (type) => {
  it(
    'retries with backoff through delay queues without blocking the queue, then dead-letters',
    async () => {
      const queue = await it_.queue(type);
      const dlq = await it_.queue('classic');
      const dlx = `${dlq}-x`;
      await it_.withAdmin(async (admin) => {
        const channel = await admin.createChannel();
        await channel.assertExchange(dlx, 'fanout', { durable: true });
        await channel.bindQueue(dlq, dlx, '');
      });
      await it_.send(queue, [
        { body: { id: 'poison' }, options: { messageId: `${queue}-poison` } },
        ...Array.from({ length: 5 }, (_, i) => ({
          body: { id: `ok${i}` },
          options: { messageId: `${queue}-ok${i}` },
        })),
      ]);
      const attempts: number[] = [];
      const consumer = await it_.worker(
        { queue, prefetch: 1, deadLetterExchange: dlx },
        {
          maxAttempts: 3,
          backoff: { initialMs: 200, maxMs: 400, jitter: false },
          handler: async (job, ctx) => {
            if (job.id === 'poison') {
              attempts.push(ctx.attempt);
              throw new Error('always fails');
            }
            await recordEffect(ctx.tx, job.id, 'w', ctx.attempt);
          },
        },
      );
      await waitFor(async () => (await it_.depth(dlq)) === 1, {
        what: 'the dead letter',
        timeoutMs: 30_000,
      });
      expect(attempts).toEqual([1, 2, 3]);
      // The five behind it ran while it waited (prefetch 1: a blocked head would stall them).
      expect((await it_.effects()).map((e) => e.id).sort()).toEqual(
        ['ok0', 'ok1', 'ok2', 'ok3', 'ok4'].sort(),
      );
      const letter = await it_.withAdmin(async (admin) =>
        (await admin.createChannel()).get(dlq, { noAck: true }),
      );
      expect(letter && letter.properties.messageId).toBe(`${queue}-poison`);
      expect(letter && letter.properties.headers?.['eo-attempts']).toBe(3);
      expect(letter && letter.properties.headers?.['eo-original-queue']).toBe(queue);
      await waitFor(() => consumer.stats().deadLettered === 1, { what: 'counted' });
      expect(await it_.depth(queue)).toBe(0);
    },
    TIMEOUT,
  );
});
