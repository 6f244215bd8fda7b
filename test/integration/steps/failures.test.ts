import { randomUUID } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { derivedKey } from 'effectively-once';
import { postCharge, stepsFixture } from './support.js';

const fixture = stepsFixture('steps_failures');
/** The key the charge flow sends the provider for the request key `key`. */
const providerKey = (key: string): string =>
  derivedKey('tenant', key, 'charge', 'charge', { schema: fixture.db().schema });

/** A gate a hook waits on until the test opens it. */
function gate(): { wait: Promise<void>; open(): void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

describe('steps: failures and their answers (web core)', () => {
  it('a declined card ends the flow with a stored 402, replayed, and no record step', async () => {
    const server = await fixture.start({ framework: 'web' });
    const key = randomUUID();
    fixture.provider().inject({ kind: 'decline' }, { key: providerKey(key) });
    const first = await postCharge(server.url, key, { customer: 'd', amount: 5 });
    expect(first.status).toBe(402);
    expect(JSON.parse(first.body)).toMatchObject({ status: 402, step: 'charge' });
    const again = await postCharge(server.url, key, { customer: 'd', amount: 5 });
    expect(again.status).toBe(402);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    // The order step committed and stays: a final error is an answer, not a rollback.
    expect(await fixture.orders(key)).toEqual([expect.objectContaining({ charge_id: null })]);
    expect(fixture.provider().requests(providerKey(key))).toBe(1);
    expect(fixture.provider().applied(providerKey(key))).toBe(0);
  });

  it.each([
    ['5xx before applying', { kind: '5xx-before' } as const],
    ['5xx after applying', { kind: '5xx-after' } as const],
    ['an answer dropped after applying', { kind: 'drop-after' } as const],
    ['an answer later than the call timeout', { kind: 'delay', delayMs: 1_500 } as const],
  ])('%s: 503 + Retry-After, then the retry resumes and charges once', async (_name, fault) => {
    const server = await fixture.start({ framework: 'web', callTimeoutMs: 500 });
    const key = randomUUID();
    fixture.provider().inject(fault, { key: providerKey(key) });
    const first = await postCharge(server.url, key, { customer: 't', amount: 7 });
    expect(first.status).toBe(503);
    expect(first.headers['retry-after']).toBeDefined();
    expect(JSON.parse(first.body)).toMatchObject({ code: 'EO_STEP_FAILED' });

    const second = await postCharge(server.url, key, { customer: 't', amount: 7 });
    expect(second.status).toBe(201);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
    const body = JSON.parse(second.body) as { order: number; charge: string };
    expect(await fixture.orders(key)).toEqual([{ id: body.order, charge_id: body.charge }]);
    expect(fixture.provider().applied(providerKey(key))).toBe(1);
    expect(fixture.provider().charge(providerKey(key))?.id).toBe(body.charge);
  });

  it('concurrent duplicates: one run, every answer the same charge', async () => {
    const hold = gate();
    const server = await fixture.start({
      framework: 'web',
      lockTimeoutMs: 5_000,
      hooks: { beforeRecord: () => hold.wait },
    });
    const key = randomUUID();
    const all = Promise.all(
      Array.from({ length: 10 }, () => postCharge(server.url, key, { customer: 'x', amount: 9 })),
    );
    setTimeout(() => hold.open(), 300);
    const answers = await all;
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([201]));
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
    expect(answers.filter((a) => a.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    expect(await fixture.orders(key)).toHaveLength(1);
    expect(fixture.provider().applied(providerKey(key))).toBe(1);
  });

  it('a retry within a live lease waits, then gets 409', async () => {
    const hold = gate();
    const server = await fixture.start({
      framework: 'web',
      lockTimeoutMs: 100,
      hooks: { beforeRecord: () => hold.wait },
    });
    const key = randomUUID();
    const first = postCharge(server.url, key, { customer: 'b', amount: 1 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const busy = await postCharge(server.url, key, { customer: 'b', amount: 1 });
    expect(busy.status).toBe(409);
    expect(JSON.parse(busy.body)).toMatchObject({ code: 'EO_CLAIM_BUSY' });
    hold.open();
    expect((await first).status).toBe(201);
  });

  it('a slow owner past its lease is taken over; its own step commit is refused (fenced)', async () => {
    const hold = gate();
    let first = true;
    const server = await fixture.start({
      framework: 'web',
      leaseMs: 300,
      lockTimeoutMs: 100,
      hooks: {
        // The first owner stalls inside its order step, past its lease.
        midStep: async () => {
          if (!first) return;
          first = false;
          await hold.wait;
        },
      },
    });
    const key = randomUUID();
    const stale = postCharge(server.url, key, { customer: 's', amount: 3 });
    await new Promise((resolve) => setTimeout(resolve, 600));
    const taker = await postCharge(server.url, key, { customer: 's', amount: 3 });
    expect(taker.status).toBe(201);
    expect((await fixture.flowRow(key))?.fence).toBe(2);
    hold.open();
    const staleAnswer = await stale;
    // The stale owner committed nothing and answers with the new owner's stored answer.
    expect(staleAnswer.status).toBe(201);
    expect(staleAnswer.body).toBe(taker.body);
    const body = JSON.parse(taker.body) as { order: number; charge: string };
    expect(await fixture.orders(key)).toEqual([{ id: body.order, charge_id: body.charge }]);
    expect(fixture.provider().applied(providerKey(key))).toBe(1);
  });
});
