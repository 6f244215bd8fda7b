/**
 * A consumer process SIGKILLed after a COMMIT and before its ack: the broker redelivers
 * the unacked message to the next consumer, which finds the claim and acks it as a
 * duplicate. Every message applied once.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { waitFor } from '../../helpers/wait-for.js';
import { TIMEOUT, counts, rabbitmqIntegration } from './harness.js';

const it_ = rabbitmqIntegration('crash');

describe('RabbitMQ source: kill after COMMIT, before the ack', () => {
  it.each(['classic', 'quorum'] as const)(
    'redelivers the committed message on a %s queue and applies it once',
    async (type) => {
      const queue = await it_.queue(type);
      const total = 10;
      await it_.send(
        queue,
        Array.from({ length: total }, (_, i) => ({
          body: { id: `c${i}` },
          options: { messageId: `${queue}-${i}` },
        })),
      );
      // The child creates the dedup table as any consumer would; then it dies.
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', fileURLToPath(new URL('./consumer-child.ts', import.meta.url))],
        {
          env: { ...process.env, EO_SCHEMA: it_.db.schema, EO_QUEUE: queue, EO_KILL_AFTER: '3' },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      const exited = new Promise<NodeJS.Signals | number | null>((resolve) =>
        child.on('exit', (code, signal) => resolve(signal ?? code)),
      );
      expect(await exited).toBe('SIGKILL');
      const applied = await it_.effects();
      expect(applied.map((e) => e.id)).toEqual(['c0', 'c1', 'c2']);

      const consumer = await it_.worker({ queue, prefetch: 2 });
      await waitFor(
        async () => consumer.stats().processed + consumer.stats().duplicates === total - 2,
        { what: 'the rest settled' },
      );
      await waitFor(async () => (await it_.depth(queue)) === 0, { what: 'an empty queue' });
      // c2 committed in the child and was never acked: redelivered, a duplicate here.
      expect(consumer.stats().duplicates).toBe(1);
      const effects = await it_.effects();
      expect(effects).toHaveLength(total);
      expect([...counts(effects).values()].every((n) => n === 1)).toBe(true);
    },
    TIMEOUT,
  );
});
