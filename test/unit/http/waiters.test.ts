import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { ConfigurationError } from '../../../src/errors.js';
import { resolveOptions } from '../../../src/http/options.js';
import { KeyWaiters } from '../../../src/http/waiters.js';

describe('KeyWaiters', () => {
  it('the first request of a key never waits; the next ones count against both bounds', () => {
    const waiters = new KeyWaiters(1, 2);
    const a = waiters.enter('t', 'k1');
    expect(a).toBeDefined();
    const b = waiters.enter('t', 'k1');
    expect(b).toBeDefined();
    expect(waiters.enter('t', 'k1')).toBeUndefined(); // one waiter per key
    expect(waiters.enter('u', 'k1')).toBeDefined(); // another scope: another key
    const c = waiters.enter('t', 'k2');
    expect(waiters.enter('t', 'k2')).toBeDefined(); // second waiter overall
    expect(waiters.enter('t', 'k3')).toBeDefined(); // a first request: no waiting
    expect(waiters.enter('t', 'k3')).toBeUndefined(); // two wait already
    b?.();
    b?.(); // leaving twice counts once
    expect(waiters.enter('t', 'k3')).toBeDefined();
    a?.();
    c?.();
  });

  it('when the holder leaves, a new arrival is the only one ahead of nobody', () => {
    const waiters = new KeyWaiters(0, 10);
    const first = waiters.enter('t', 'k');
    expect(waiters.enter('t', 'k')).toBeUndefined(); // 0: nobody may wait
    first?.();
    expect(waiters.enter('t', 'k')).toBeDefined();
  });
});

describe('waiter options', () => {
  const pool = (max?: number): pg.Pool => new pg.Pool(max === undefined ? {} : { max });

  it('default: one per key, half the pool in all', () => {
    expect(resolveOptions({ pool: pool(), scope: 's' })).toMatchObject({
      maxWaitersPerKey: 1,
      maxWaiters: 5,
    });
    expect(resolveOptions({ pool: pool(3), scope: 's' }).maxWaiters).toBe(1);
    expect(resolveOptions({ pool: pool(1), scope: 's' }).maxWaiters).toBe(1);
  });

  it('out of range or not an integer: ConfigurationError', () => {
    expect(() => resolveOptions({ pool: pool(), scope: 's', maxWaiters: -1 })).toThrow(
      ConfigurationError,
    );
    expect(() => resolveOptions({ pool: pool(), scope: 's', maxWaitersPerKey: 1.5 })).toThrow(
      /maxWaitersPerKey/,
    );
  });
});
