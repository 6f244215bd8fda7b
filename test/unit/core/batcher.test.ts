import { describe, expect, it } from '@jest/globals';
import { Batcher } from '../../../src/consumer/batcher.js';
import { delivery } from './fake-delivery.js';
import type { DeliveryOutcome } from '../../../src/index.js';

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Batcher', () => {
  it('runs a batch only after the earlier batches sharing one of its keys settled', async () => {
    const log: string[] = [];
    // maxSize 2: every two dispatches make a batch; concurrency 4 would let them all overlap.
    const batcher = new Batcher<string>(4, 2, 1000, async (ds) => {
      const ids = ds.map((d) => d.body).join('+');
      log.push(`start ${ids}`);
      await tick(ids.startsWith('a1') ? 30 : 5);
      log.push(`end ${ids}`);
      return ds.map((): DeliveryOutcome => 'processed');
    });
    const outcomes = [
      batcher.dispatch(delivery('a1', 'A')),
      batcher.dispatch(delivery('b1', 'B')),
      // Shares A with the first batch: waits for it although a slot is free.
      batcher.dispatch(delivery('a2', 'A')),
      batcher.dispatch(delivery('c1', 'C')),
      // Shares nothing with the batches before: runs at once.
      batcher.dispatch(delivery('d1', 'D')),
      batcher.dispatch(delivery('e1')),
    ];
    expect(batcher.pending).toBe(6);
    expect(await Promise.all(outcomes)).toEqual(Array(6).fill('processed'));
    expect(log.indexOf('start a2+c1')).toBeGreaterThan(log.indexOf('end a1+b1'));
    expect(log.indexOf('start d1+e1')).toBeLessThan(log.indexOf('end a1+b1'));
    expect(batcher.pending).toBe(0);
    await batcher.idle();
  });

  it('settles every delivery of a batch whose work threw as unsettled, and frees their room', async () => {
    const batcher = new Batcher<string>(1, 2, 1000, () => Promise.reject(new Error('boom')));
    const outcomes = [batcher.dispatch(delivery('a', 'A')), batcher.dispatch(delivery('b', 'A'))];
    expect(batcher.freeCapacity()).toBe(2);
    expect(await Promise.all(outcomes)).toEqual(['unsettled', 'unsettled']);
    expect(batcher.freeCapacity()).toBe(4);
  });
  it('keeps a hold for a delivery of the key dispatched before the hold but flushed after the batch settled', async () => {
    // a1 goes back to the broker (hold) while a2, received before that, waits in the buffer
    // for its batch. a2 must be released, not run: run, it overtakes a1's redelivery.
    let releaseFirst!: () => void;
    const firstMayEnd = new Promise<void>((r) => (releaseFirst = r));
    const heldSeen: Record<string, boolean> = {};
    const batcher = new Batcher<string>(2, 2, 60_000, async (ds, held, hold) => {
      ds.forEach((d, i) => (heldSeen[d.body] = held[i]!));
      if (ds[0]!.body === 'a1') {
        await firstMayEnd;
        hold('A');
        return ['retry', 'processed'];
      }
      return ds.map((d, i): DeliveryOutcome => (held[i] ? 'released' : 'processed'));
    });
    const first = [batcher.dispatch(delivery('a1', 'A')), batcher.dispatch(delivery('b1', 'B'))];
    // Received before a1 goes back: it sits in the buffer (maxWaitMs is long).
    const a2 = batcher.dispatch(delivery('a2', 'A'));
    releaseFirst();
    expect(await Promise.all(first)).toEqual(['retry', 'processed']);
    // The first batch settled; now a2's batch fills up and flushes.
    const c1 = batcher.dispatch(delivery('c1', 'C'));
    expect(await Promise.all([a2, c1])).toEqual(['released', 'processed']);
    expect(heldSeen.a2).toBe(true);
    await batcher.idle();
  });
});
