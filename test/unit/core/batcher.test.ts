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
});
