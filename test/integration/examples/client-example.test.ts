import { describe, expect, it } from '@jest/globals';
import { main, newJob } from '../../../examples/client-retry.js';
import { cleanupAfterEach, startProxy, startServer } from '../client/support.js';

cleanupAfterEach();

describe('examples/client-retry.ts against a real server on loopback', () => {
  it('the first response is lost after the charge committed: the retry gets the replay, one charge', async () => {
    const server = await startServer();
    const proxy = await startProxy(server, {
      decide: (exchange) => (exchange.occurrence === 0 ? 'drop' : 'pass'),
    });
    const job = newJob('cus_1', 2500);
    const outcome = await main({
      signal: new AbortController().signal,
      env: { PAYMENTS_URL: proxy.url },
      job,
    });
    expect(outcome).toEqual({ status: 'charged', chargeId: 'ch_1', attempts: 2, replayed: true });
    expect(server.effects).toEqual(new Map([[job.idempotencyKey, 1]]));

    // The job run again later (a worker restart): same key, same charge, nothing new.
    const again = await main({
      signal: new AbortController().signal,
      env: { PAYMENTS_URL: server.url },
      job,
    });
    expect(again).toMatchObject({
      status: 'charged',
      chargeId: 'ch_1',
      attempts: 1,
      replayed: true,
    });
    expect(server.effects.get(job.idempotencyKey)).toBe(1);
  });

  it("the same key with another amount is the server's 422: rejected, not retried", async () => {
    const server = await startServer();
    const job = newJob('cus_2', 100);
    const env = { PAYMENTS_URL: server.url };
    await main({ signal: new AbortController().signal, env, job });
    const outcome = await main({
      signal: new AbortController().signal,
      env,
      job: { ...job, amountCents: 101 },
    });
    expect(outcome).toMatchObject({ status: 'rejected', httpStatus: 422 });
    expect(server.arrivalsFor(job.idempotencyKey)).toHaveLength(2);
  });
});
