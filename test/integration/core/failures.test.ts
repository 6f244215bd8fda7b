import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import {
  CommitUnknownError,
  HandlerTimeoutError,
  type EffectivelyOnceError,
} from '../../../src/index.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/db.js';
import { memoryHarness } from '../../helpers/memory-harness.js';
import { waitFor } from '../../helpers/wait-for.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('failures');
});
afterAll(async () => db.close());
beforeEach(async () => {
  await db.pool.query('DROP TABLE IF EXISTS charges; DROP TABLE IF EXISTS processed_messages');
});

async function claimRows(key: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM processed_messages WHERE message_key = $1',
    [key],
  );
  return Number(rows[0]!.n);
}

describe('failure semantics', () => {
  it('a handler that throws leaves no claim; the retry applies the effect once', async () => {
    const claimsSeenAtFailure: number[] = [];
    const h = await memoryHarness(db, {
      after: async (_m, ctx) => {
        if (ctx.attempt === 1) throw new Error('downstream hiccup');
      },
    });
    h.consumer.on('failed', () => {
      void claimRows('a').then((n) => claimsSeenAtFailure.push(n));
    });
    const message = h.source.send({ id: 'a', amount: 10 }, { key: 'a' });
    await h.consumer.start();
    await waitFor(() => message.state === 'acked', { what: 'acked' });
    await h.consumer.stop();
    expect(await h.effects()).toEqual([{ id: 'a', amount: 10 }]);
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(claimsSeenAtFailure).toEqual([0]);
    expect(await claimRows('a')).toBe(1);
  });

  it('dead-letters after maxAttempts and never applies the effect', async () => {
    const h = await memoryHarness(db, {
      maxAttempts: 3,
      after: async (m) => {
        if (m.id === 'p') throw new Error('always fails');
      },
    });
    const poison = h.source.send({ id: 'p', amount: 1 }, { key: 'p' });
    const good = h.source.send({ id: 'g', amount: 2 }, { key: 'g' });
    await h.consumer.start();
    await waitFor(() => poison.state === 'dead-lettered' && good.state === 'acked', {
      what: 'settled',
    });
    await h.consumer.stop();
    expect(poison.attempts).toBe(3);
    expect(poison.deadLetterReason?.code).toBe('EO_HANDLER');
    expect(await h.effects()).toEqual([{ id: 'g', amount: 2 }]);
    expect(await claimRows('p')).toBe(0);
  });

  it('crash after COMMIT, before ack: the redelivery is a duplicate and is acked', async () => {
    const h = await memoryHarness(db);
    h.source.loseNextAcks(1);
    const message = h.source.send({ id: 'c', amount: 7 }, { key: 'c' });
    await h.consumer.start();
    await waitFor(() => message.state === 'acked', { what: 'acked' });
    await h.consumer.stop();
    expect(message.outcomes).toEqual(['processed', 'duplicate']);
    expect(message.attempts).toBe(2);
    expect(await h.effects()).toEqual([{ id: 'c', amount: 7 }]);
  });

  it('backend killed between the handler and COMMIT: COMMIT is not sent (known rollback), no attempt spent, the redelivery applies the effect once', async () => {
    const failures: EffectivelyOnceError[] = [];
    // The backend leaving pg_stat_activity does not mean our socket has seen it close:
    // wait for the consumer to log the lost connection, else COMMIT may still be sent
    // on the dying socket (then the outcome is unknown, another test's case).
    let connectionLost = false;
    const quiet = (): void => {};
    const h = await memoryHarness(db, {
      logger: {
        debug: quiet,
        info: quiet,
        error: quiet,
        warn: (_obj, msg) => {
          if (msg?.includes('connection lost')) connectionLost = true;
        },
      },
      after: async (_m, ctx) => {
        if (ctx.attempt > 1) return;
        const { rows } = await ctx.tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const pid = rows[0]!.pid;
        await db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await waitFor(() => connectionLost, { what: 'the claim connection seen lost' });
      },
    });
    h.consumer.on('failed', (e) => failures.push(e.error));
    const message = h.source.send({ id: 'k', amount: 5 }, { key: 'k' });
    await h.consumer.start();
    await waitFor(() => message.state === 'acked', { what: 'acked' });
    await h.consumer.stop();
    expect(failures).toHaveLength(1);
    // The client saw its connection die before COMMIT was sent: the outcome is known
    // (rolled back), and it is infrastructure, not the message's fault.
    expect(failures[0]?.code).toBe('EO_DATABASE');
    expect(failures[0]).not.toBeInstanceOf(CommitUnknownError);
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(message.attempts).toBe(2);
    expect(await h.effects()).toEqual([{ id: 'k', amount: 5 }]);
  });

  it('an ack that fails after COMMIT is reported, and the redelivery is deduplicated', async () => {
    const h = await memoryHarness(db);
    const errors: EffectivelyOnceError[] = [];
    h.consumer.on('error', (e) => errors.push(e));
    h.source.failNextAcks(1);
    const message = h.source.send({ id: 'x', amount: 3 }, { key: 'x' });
    await h.consumer.start();
    await waitFor(() => message.state === 'acked', { what: 'acked' });
    await h.consumer.stop();
    expect(errors.map((e) => e.code)).toEqual(['EO_BROKER']);
    expect(h.consumer.stats().ackFailures).toBe(1);
    expect(message.outcomes).toEqual(['processed', 'duplicate']);
    expect(await h.effects()).toHaveLength(1);
  });

  it('a handler that never resolves times out, rolls back and is retried', async () => {
    const failures: EffectivelyOnceError[] = [];
    const h = await memoryHarness(db, {
      handlerTimeoutMs: 200,
      after: async (_m, ctx) => {
        if (ctx.attempt === 1) await new Promise(() => undefined);
      },
    });
    h.consumer.on('failed', (e) => failures.push(e.error));
    const message = h.source.send({ id: 't', amount: 9 }, { key: 't' });
    await h.consumer.start();
    await waitFor(() => message.state === 'acked', { what: 'acked' });
    await h.consumer.stop();
    expect(failures[0]).toBeInstanceOf(HandlerTimeoutError);
    expect(message.outcomes).toEqual(['retry', 'processed']);
    expect(await h.effects()).toEqual([{ id: 't', amount: 9 }]);
  });
});
