/**
 * The RabbitMQ source end to end on a real node: every message applied once, on classic
 * and quorum queues; a message-id sent twice applied once; the key from a header.
 */
import { describe, expect, it } from '@jest/globals';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, counts, rabbitmqIntegration } from './harness.js';

const it_ = rabbitmqIntegration('exactly_once');

describe.each(['classic', 'quorum'] as const)('RabbitMQ source on a %s queue', (type) => {
  it(
    'applies every message once and leaves the queue empty',
    async () => {
      const queue = await it_.queue(type);
      const total = 50;
      await it_.send(
        queue,
        Array.from({ length: total }, (_, i) => ({
          body: { id: `m${i}` },
          options: { messageId: `${queue}-${i}` },
        })),
      );
      const consumer = await it_.worker({ queue, prefetch: 8 });
      await waitFor(async () => (await it_.effects()).length === total, {
        what: `${total} effects`,
      });
      await waitFor(() => consumer.stats().processed === total, { what: 'all acked' });
      await consumer.stop();
      expect(await it_.depth(queue)).toBe(0);
      expect([...counts(await it_.effects()).values()].every((n) => n === 1)).toBe(true);
    },
    TIMEOUT,
  );

  it(
    'applies a message-id sent twice once, and acks both',
    async () => {
      const queue = await it_.queue(type);
      await it_.send(queue, [
        { body: { id: 'a' }, options: { messageId: `${queue}-same` } },
        { body: { id: 'a' }, options: { messageId: `${queue}-same` } },
        { body: { id: 'b' }, options: { messageId: `${queue}-other` } },
      ]);
      const consumer = await it_.worker({ queue, prefetch: 1 });
      await waitFor(() => consumer.stats().processed + consumer.stats().duplicates === 3, {
        what: 'three settled',
      });
      await consumer.stop();
      expect(consumer.stats().duplicates).toBe(1);
      expect(await it_.effects()).toHaveLength(2);
      expect(await it_.depth(queue)).toBe(0);
    },
    TIMEOUT,
  );
});

describe('RabbitMQ source keys', () => {
  it(
    'reads the key from a header when told, and dead-letters a message without it',
    async () => {
      const queue = await it_.queue('classic');
      const dlq = await it_.queue('classic');
      const dlx = `${dlq}-x`;
      await it_.withAdmin(async (admin) => {
        const channel = await admin.createChannel();
        await channel.assertExchange(dlx, 'fanout', { durable: true });
        await channel.bindQueue(dlq, dlx, '');
      });
      await it_.send(queue, [
        { body: { id: 'h1' }, options: { headers: { 'idempotency-key': 'k1' }, messageId: 'x' } },
        { body: { id: 'h1' }, options: { headers: { 'idempotency-key': 'k1' }, messageId: 'y' } },
        { body: { id: 'h3' }, options: { messageId: 'z' } },
      ]);
      const consumer = await it_.worker({
        queue,
        key: 'idempotency-key',
        deadLetterExchange: dlx,
      });
      await waitFor(async () => (await it_.depth(dlq)) === 1, { what: 'one dead letter' });
      await waitFor(() => consumer.stats().duplicates === 1, { what: 'the duplicate' });
      const effects = await it_.effects();
      expect(effects.map((e) => e.id)).toEqual(['h1']);
      const letter = await it_.withAdmin(async (admin) =>
        (await admin.createChannel()).get(dlq, { noAck: true }),
      );
      expect(letter && letter.properties.headers?.['eo-error-code']).toBe('EO_INVALID_KEY');
      expect(letter && letter.properties.messageId).toBe('z');
    },
    TIMEOUT,
  );
});
