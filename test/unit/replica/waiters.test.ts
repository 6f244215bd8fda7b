import { describe, expect, it } from '@jest/globals';
import { parseLsn, WaiterQueue } from '../../../src/replica/waiters.js';
import { resolveReplicaSafe } from '../../../src/replica/options.js';
import { ConfigurationError } from '../../../src/errors.js';

const values = (ws: Array<{ value: string }>): string[] => ws.map((w) => w.value);

describe('WaiterQueue', () => {
  it('gives a poll only the waiters added before it was sent', () => {
    const q = new WaiterQueue<string>();
    q.add('a', 1000);
    const mark = q.mark();
    q.add('b', 1000); // after the poll was sent: its commit may be past the poll's head
    q.assign(mark, 100n);
    expect(values(q.release(100n))).toEqual(['a']);
    expect(q.size).toBe(1);
    // b has no target yet: no position releases it until a later poll assigns one.
    expect(values(q.release(1_000_000n))).toEqual([]);
    q.assign(q.mark(), 200n);
    expect(values(q.release(199n))).toEqual([]);
    expect(values(q.release(200n))).toEqual(['b']);
    expect(q.size).toBe(0);
  });

  it('releases in target order, one position serving many waiters', () => {
    const q = new WaiterQueue<string>();
    q.add('a', 1000);
    q.add('b', 1000);
    q.assign(q.mark(), 300n);
    q.add('c', 1000);
    q.assign(q.mark(), 100n); // a lower position keeps the order sorted
    q.add('d', 1000);
    q.assign(q.mark(), 500n);
    expect(values(q.release(300n))).toEqual(['c', 'a', 'b']);
    expect(values(q.release(499n))).toEqual([]);
    expect(values(q.release(500n))).toEqual(['d']);
  });

  it('expires by deadline whether assigned or not, and drains everything', () => {
    const q = new WaiterQueue<string>();
    q.add('early', 10);
    q.add('late', 50);
    q.assign(q.mark(), 1n);
    q.add('unassigned-early', 20);
    expect(q.nextDeadline()).toBe(10);
    expect(values(q.expire(20)).sort()).toEqual(['early', 'unassigned-early']);
    expect(q.nextDeadline()).toBe(50);
    q.add('x', 99);
    expect(values(q.drain()).sort()).toEqual(['late', 'x']);
    expect(q.size).toBe(0);
    expect(q.nextDeadline()).toBeUndefined();
  });
});

describe('parseLsn', () => {
  it('reads the two hex halves', () => {
    expect(parseLsn('0/0')).toBe(0n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) | 0xb374d848n);
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).toBe(true);
  });
  it('refuses what is not one', () => {
    expect(() => parseLsn('16B374D848')).toThrow();
    expect(() => parseLsn('/1')).toThrow();
  });
});

describe('resolveReplicaSafe', () => {
  it('is off when absent or false, and fills in the defaults', () => {
    expect(resolveReplicaSafe(undefined)).toBeUndefined();
    expect(resolveReplicaSafe(false)).toBeUndefined();
    expect(resolveReplicaSafe({})).toEqual({
      mode: 'wait',
      names: undefined,
      count: 1,
      level: 'flush',
      maxWaitMs: 5000,
      onLag: 'hold',
      pollIntervalMs: 5,
    });
    expect(resolveReplicaSafe({ mode: 'synchronous-commit', level: 'apply' })).toEqual({
      mode: 'synchronous-commit',
      level: 'apply',
    });
  });
  it('names the bad option', () => {
    const bad = (o: unknown): unknown => {
      try {
        resolveReplicaSafe(o as never);
      } catch (e) {
        return e instanceof ConfigurationError ? e.details['option'] : e;
      }
      return undefined;
    };
    expect(bad({ level: 'write' })).toBe('replicaSafe.level');
    expect(bad({ onLag: 'ignore' })).toBe('replicaSafe.onLag');
    expect(bad({ standby: { names: [] } })).toBe('replicaSafe.standby.names');
    expect(bad({ standby: { count: 0 } })).toBe('replicaSafe.standby.count');
    expect(bad({ maxWaitMs: 0 })).toBe('replicaSafe.maxWaitMs');
    expect(bad({ mode: 'quorum' })).toBe('replicaSafe.mode');
    expect(bad('on')).toBe('replicaSafe');
  });
});
