import { describe, expect, it } from '@jest/globals';
import type { Pool } from 'pg';
import type { DataLayer } from '../../../src/data-layer.js';
import { ConfigurationError, RoutingError, RoutingViolationError } from '../../../src/errors.js';
import { resolveRouting } from '../../../src/routing/options.js';
import { Router } from '../../../src/routing/router.js';
import { routedTransactions } from '../../../src/tx/routed.js';
import type { ClaimTransactions } from '../../../src/tx/claim-transaction.js';
import type { Delivery } from '../../../src/types.js';

const pool = (): Pool => ({ connect: () => undefined }) as unknown as Pool;
const noLayer = (): undefined => undefined;

function router(route: (key: string) => string, rememberKeys?: number): Router {
  const routing = resolveRouting(
    {
      databases: { a: pool(), b: pool() },
      route: (t: { key: string }) => route(t.key),
      ...(rememberKeys === undefined ? {} : { rememberKeys }),
    },
    undefined,
    noLayer,
  )!;
  return new Router(routing);
}

describe('Router', () => {
  it('answers the database the route names, every time for the same key', () => {
    const r = router((key) => (key.startsWith('a') ? 'a' : 'b'));
    expect(r.route({ key: 'a1', scope: 's' })).toBe('a');
    expect(r.route({ key: 'b1', scope: 's' })).toBe('b');
    expect(r.route({ key: 'a1', scope: 's' })).toBe('a');
  });

  it('refuses a route that changes its mind about a key it saw', () => {
    let n = 0;
    const r = router(() => (n++ === 0 ? 'a' : 'b'));
    expect(r.route({ key: 'k', scope: 's' })).toBe('a');
    expect(() => r.route({ key: 'k', scope: 's' })).toThrow(RoutingViolationError);
    // Another scope is another key.
    expect(r.route({ key: 'k', scope: 'other' })).toBe('b');
  });

  it('forgets the oldest keys past rememberKeys, and remembers none with 0', () => {
    let flip = false;
    const r = router(() => (flip ? 'b' : 'a'), 1);
    r.route({ key: 'k1', scope: 's' });
    r.route({ key: 'k2', scope: 's' });
    flip = true;
    expect(r.route({ key: 'k1', scope: 's' })).toBe('b'); // k1 was forgotten
    expect(() => r.route({ key: 'k1', scope: 's' })).not.toThrow();
    const none = router(() => (flip ? 'b' : 'a'), 0);
    flip = false;
    none.route({ key: 'k', scope: 's' });
    flip = true;
    expect(none.route({ key: 'k', scope: 's' })).toBe('b');
  });

  it('files an unknown name and a throwing route as RoutingError', () => {
    expect(() => router(() => 'c').route({ key: 'k', scope: 's' })).toThrow(RoutingError);
    const r = router(() => {
      throw new Error('no tenant');
    });
    expect(() => r.route({ key: 'k', scope: 's' })).toThrow(/the route threw/);
  });
});

describe('resolveRouting', () => {
  it('is undefined for a plain pool, and refuses bad routings with a ConfigurationError', () => {
    expect(resolveRouting(pool(), undefined, noLayer)).toBeUndefined();
    const p = pool();
    for (const bad of [
      { databases: {}, route: () => 'a' },
      { databases: { a: p, b: p }, route: () => 'a' },
      { databases: { a: { pool: 1 } }, route: () => 'a' },
      { databases: { a: pool() }, route: () => 'a', rememberKeys: -1 },
    ])
      expect(() => resolveRouting(bad, undefined, noLayer)).toThrow(ConfigurationError);
    const layer = { name: 'fake', transaction: noLayer, sql: noLayer, serverError: noLayer };
    const asLayer = layer as unknown as DataLayer<unknown>;
    expect(() =>
      resolveRouting({ databases: { a: pool() }, route: () => 'a' }, asLayer, noLayer),
    ).toThrow(/its own/);
  });
});

describe('routedTransactions', () => {
  const transactions = (): ClaimTransactions<unknown> =>
    ({ hardStop: undefined, claimBegins: 'BEGIN' }) as unknown as ClaimTransactions<unknown>;

  it("refuses a delivery whose source keeps its progress in the claim's transaction", () => {
    const a = transactions();
    const routed = routedTransactions(
      [
        { name: 'a', transactions: a },
        { name: 'b', transactions: transactions() },
      ],
      router(() => 'a'),
    );
    expect(routed.at!({ key: 'k1', scope: 's' })).toBe(a);
    const delivery = {
      key: 'k2',
      inTransaction: async () => undefined,
    } as unknown as Delivery<unknown>;
    const refused = routed.at!({ key: 'k2', scope: 's', delivery });
    expect(refused).toMatchObject({ kind: 'failed', infrastructure: false });
    expect((refused as { error: unknown }).error).toBeInstanceOf(RoutingError);
  });
});
