import { describe, expect, it } from '@jest/globals';
import { OffsetTracker } from '../../../adapters/kafka/offset-tracker.js';

function tracker(offsets: number[]): OffsetTracker {
  const t = new OffsetTracker();
  for (const o of offsets) expect(t.add(BigInt(o))).toBe(true);
  return t;
}

describe('OffsetTracker', () => {
  it('commits nothing before the first record finishes', () => {
    const t = tracker([10, 11, 12]);
    expect(t.commitPoint).toBeUndefined();
    expect(t.uncommitted()).toBeUndefined();
    expect(t.pending).toBe(3);
  });

  it('commits offset+1 of the highest record of the finished prefix, in order', () => {
    const t = tracker([10, 11, 12]);
    t.finish(10n);
    expect(t.commitPoint).toBe(11n);
    t.finish(11n);
    t.finish(12n);
    expect(t.commitPoint).toBe(13n);
    expect(t.pending).toBe(0);
  });

  it('holds the commit point behind an unfinished record, however many finished after it', () => {
    const t = tracker([0, 1, 2, 3, 4]);
    t.finish(1n);
    t.finish(2n);
    t.finish(4n);
    expect(t.commitPoint).toBeUndefined();
    expect(t.pending).toBe(5);
    t.finish(0n);
    expect(t.commitPoint).toBe(3n);
    expect(t.pending).toBe(2);
    t.finish(3n);
    expect(t.commitPoint).toBe(5n);
  });

  it('treats gaps in offsets (compaction, transaction markers) as contiguous', () => {
    const t = tracker([5, 9, 20]);
    t.finish(9n);
    expect(t.commitPoint).toBeUndefined();
    t.finish(5n);
    expect(t.commitPoint).toBe(10n);
    t.finish(20n);
    expect(t.commitPoint).toBe(21n);
  });

  it('refuses offsets at or below the last received (a refetch)', () => {
    const t = tracker([3, 4]);
    expect(t.add(4n)).toBe(false);
    expect(t.add(2n)).toBe(false);
    expect(t.add(6n)).toBe(true);
    expect(t.last).toBe(6n);
  });

  it('ignores finishing unknown, repeated or already committed offsets', () => {
    const t = tracker([1, 2]);
    t.finish(7n);
    t.finish(0n);
    expect(t.commitPoint).toBeUndefined();
    t.finish(1n);
    t.finish(1n);
    expect(t.commitPoint).toBe(2n);
    expect(t.pending).toBe(1);
    t.finish(2n);
    t.finish(2n);
    expect(t.commitPoint).toBe(3n);
  });

  it('reports a commit point once until it advances again', () => {
    const t = tracker([0, 1, 2]);
    t.finish(0n);
    expect(t.uncommitted()).toBe(1n);
    t.markCommitted(1n);
    expect(t.uncommitted()).toBeUndefined();
    expect(t.committed).toBe(1n);
    t.finish(2n);
    expect(t.uncommitted()).toBeUndefined();
    t.finish(1n);
    expect(t.uncommitted()).toBe(3n);
    t.markCommitted(2n); // an older commit finishing late never moves the mark back
    t.markCommitted(3n);
    t.markCommitted(2n);
    expect(t.committed).toBe(3n);
    expect(t.uncommitted()).toBeUndefined();
  });

  it('knows which offsets are pending', () => {
    const t = tracker([1, 3, 5]);
    t.finish(3n);
    expect([1n, 2n, 3n, 5n, 6n].map((o) => t.isPending(o))).toEqual([
      true,
      false,
      false,
      true,
      false,
    ]);
  });

  describe('storableAfter (offsets stored with the effect)', () => {
    it('moves past the record and the finished records right after it when it is the lowest unfinished', () => {
      const t = tracker([10, 11, 12, 13]);
      expect(t.storableAfter([10n])).toBe(11n);
      t.finish(11n);
      t.finish(12n);
      expect(t.storableAfter([10n])).toBe(13n);
      t.finish(13n);
      expect(t.storableAfter([10n])).toBe(14n);
    });

    it('stays at the lowest unfinished record when an earlier record is still open', () => {
      const t = tracker([10, 11, 12]);
      expect(t.storableAfter([12n])).toBe(10n);
      t.finish(10n);
      expect(t.storableAfter([12n])).toBe(11n);
    });

    it('is undefined for records that are not pending', () => {
      const t = tracker([10, 11]);
      t.finish(10n);
      expect(t.storableAfter([10n])).toBeUndefined();
      expect(t.storableAfter([99n])).toBeUndefined();
    });
  });

  it('stays correct over long runs (internal compaction)', () => {
    const t = new OffsetTracker();
    for (let o = 0; o < 10_000; o++) t.add(BigInt(o));
    for (let o = 0; o < 9_000; o++) t.finish(BigInt(o));
    expect(t.commitPoint).toBe(9000n);
    expect(t.pending).toBe(1000);
    expect(t.isPending(9000n)).toBe(true);
    t.finish(9500n);
    expect(t.commitPoint).toBe(9000n);
    for (let o = 9000; o < 10_000; o++) t.finish(BigInt(o));
    expect(t.commitPoint).toBe(10_000n);
    expect(t.pending).toBe(0);
  });

  it('matches a naive model under random gaps and finishing orders', () => {
    let seed = 42;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    for (let round = 0; round < 200; round++) {
      const t = new OffsetTracker();
      const received: bigint[] = [];
      let next = BigInt(Math.floor(random() * 1000));
      const count = 1 + Math.floor(random() * 40);
      for (let i = 0; i < count; i++) {
        received.push(next);
        t.add(next);
        next += 1n + BigInt(random() < 0.2 ? Math.floor(random() * 5) : 0);
      }
      const order = [...received].sort(() => random() - 0.5);
      const finished = new Set<bigint>();
      for (const offset of order) {
        // Before finishing `offset`, what it may store must be safe: every received record below is finished.
        const storable = t.storableAfter([offset]) as bigint;
        for (const r of received)
          if (r < storable && r !== offset) expect(finished.has(r)).toBe(true);
        t.finish(offset);
        finished.add(offset);
        let expected: bigint | undefined;
        for (const r of received) {
          if (!finished.has(r)) break;
          expected = r + 1n;
        }
        expect(t.commitPoint).toBe(expected);
        expect(t.pending).toBe(
          received.filter((r) => expected === undefined || r >= expected).length,
        );
      }
    }
  });
});
