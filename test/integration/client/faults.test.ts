/**
 * idempotentFetch through the fault-injecting TCP proxy (kit/fault-proxy.ts)
 * to a real node:http server with an in-memory Idempotency-Key store: requests reset
 * on the way in, responses dropped after the server committed, responses held past the
 * client's timeout. N logical operations must give exactly N effects, none lost, and
 * every attempt of one operation must carry the same key and the same bytes.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import pLimit from 'p-limit';
import { idempotentFetch, type IdempotentFetchResult } from 'effectively-once/client';
import { FAST, cleanupAfterEach, startProxy, startServer } from './support.js';

cleanupAfterEach();

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

describe('the fault proxy, one fault at a time', () => {
  it.each([
    ['reset', 'the request never reached the server', ['applied']],
    [
      'drop',
      'the server applied it, the client saw a reset, the retry replays',
      ['applied', 'replayed'],
    ],
    [
      'delay',
      'the server applied it, the client timed out, the retry replays',
      ['applied', 'replayed'],
    ],
  ] as const)('%s: %s', async (fault, _what, outcomes) => {
    const server = await startServer();
    const proxy = await startProxy(server, {
      decide: (exchange) => (exchange.occurrence === 0 ? fault : 'pass'),
      delayMs: 10_000,
    });
    const result = await idempotentFetch(
      `${proxy.url}/charges`,
      { method: 'POST' },
      { json: { amount: 1 }, attemptTimeoutMs: 1000, ...FAST },
    );
    expect(result.response.status).toBe(201);
    expect(result.attempts).toBe(2);
    expect(result.replayed).toBe(outcomes.length === 2);
    expect(proxy.exchanges.map((e) => [e.key, e.fault])).toEqual([
      [result.key, fault],
      [result.key, 'pass'],
    ]);
    expect(server.arrivalsFor(result.key).map((a) => a.outcome)).toEqual(outcomes);
    expect(server.effects.get(result.key)).toBe(1);
  });
});

describe('N logical operations through seeded faults', () => {
  it('exactly N effects, none lost; each operation kept one key and one body', async () => {
    const N = 40;
    const server = await startServer();
    const proxy = await startProxy(server, {
      seed: 12,
      faults: { reset: 0.15, drop: 0.2, delay: 0.1 },
      maxFaultsPerKey: 3,
      delayMs: 6000,
    });
    const bodies = Array.from({ length: N }, (_, i) =>
      JSON.stringify({ charge: `op-${i}`, amountCents: 100 + i }),
    );
    const limit = pLimit(8);
    const results = await Promise.all(
      bodies.map((body, i) =>
        limit((): Promise<IdempotentFetchResult> =>
          idempotentFetch(
            `${proxy.url}/charges`,
            { method: 'POST', headers: { 'content-type': 'application/json' }, body },
            { key: `op-${i}`, attempts: 10, attemptTimeoutMs: 2000, ...FAST },
          ),
        ),
      ),
    );

    // Every fault kind happened (the seed and keys fix the plan).
    const counts = proxy.counts();
    expect(counts.reset).toBeGreaterThan(0);
    expect(counts.drop).toBeGreaterThan(0);
    expect(counts.delay).toBeGreaterThan(0);

    // None lost, none doubled.
    expect(results.map((r) => r.response.status)).toEqual(bodies.map(() => 201));
    expect([...server.effects.entries()].sort()).toEqual(
      bodies.map((_, i) => [`op-${i}`, 1] as const).sort(),
    );

    for (const [i, result] of results.entries()) {
      const key = `op-${i}`;
      expect(result.key).toBe(key);
      // Every attempt, reset ones included, carried this key: the proxy saw them all.
      expect(proxy.exchanges.filter((e) => e.key === key)).toHaveLength(result.attempts);
      // Every attempt that reached the server carried the same bytes.
      const arrivals = server.arrivalsFor(key);
      expect(arrivals.map((a) => a.bodySha256)).toEqual(arrivals.map(() => sha256(bodies[i]!)));
      // `replayed` is the server's word on the final answer.
      expect(result.replayed).toBe(arrivals.at(-1)?.outcome === 'replayed');
      const { applied } = (await result.response.json()) as { applied: number };
      expect(applied).toBe(1);
    }
    expect(results.filter((r) => r.replayed).length).toBeGreaterThan(0);
    expect(results.filter((r) => r.attempts > 1).length).toBeGreaterThan(0);
  });

  it('with minted keys too: one key per operation, whatever the attempts', async () => {
    const server = await startServer();
    const proxy = await startProxy(server, {
      // Scripted: every operation's first two attempts fail, the second after the commit.
      decide: (exchange) => (['reset', 'drop'] as const)[exchange.occurrence] ?? 'pass',
    });
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        idempotentFetch(`${proxy.url}/charges`, { method: 'POST' }, { json: { i }, ...FAST }),
      ),
    );
    expect(new Set(results.map((r) => r.key)).size).toBe(5);
    for (const result of results) {
      expect(result).toMatchObject({ attempts: 3, replayed: true });
      expect(proxy.exchanges.filter((e) => e.key === result.key).map((e) => e.fault)).toEqual([
        'reset',
        'drop',
        'pass',
      ]);
      expect(server.effects.get(result.key)).toBe(1);
    }
    expect(server.effects.size).toBe(5);
  });
});
