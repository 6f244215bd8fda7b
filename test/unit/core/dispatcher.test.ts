import { describe, expect, it } from '@jest/globals';
import { Dispatcher } from '../../../src/consumer/dispatcher.js';
import { delivery } from './fake-delivery.js';
import type { Delivery, DeliveryOutcome } from '../../../src/index.js';

/** A worker whose broker part is already done. */
function settledNow(
  work: (d: Delivery<string>) => Promise<DeliveryOutcome>,
): (d: Delivery<string>) => Promise<() => Promise<DeliveryOutcome>> {
  return async (d) => {
    const outcome = await work(d);
    return async () => outcome;
  };
}

const skipNever = async (): Promise<'released'> => {
  throw new Error('nothing should be skipped');
};
const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Dispatcher', () => {
  it('never runs two deliveries of one ordering key at once and keeps their order', async () => {
    const running = new Set<string>();
    const order: string[] = [];
    let overlapWithinGroup = false;
    let maxParallel = 0;
    let active = 0;
    const d = new Dispatcher<string>(
      10,
      10,
      settledNow(async (del) => {
        const group = del.orderingKey!;
        if (running.has(group)) overlapWithinGroup = true;
        running.add(group);
        active++;
        maxParallel = Math.max(maxParallel, active);
        await tick(Math.random() * 5);
        order.push(del.body);
        running.delete(group);
        active--;
        return 'processed';
      }),
      skipNever,
    );
    const all = [];
    for (let i = 0; i < 20; i++)
      for (const g of ['a', 'b', 'c']) all.push(d.dispatch(delivery(`${g}${i}`, g)));
    await Promise.all(all);
    expect(overlapWithinGroup).toBe(false);
    expect(maxParallel).toBeGreaterThan(1);
    for (const g of ['a', 'b', 'c']) {
      expect(order.filter((x) => x.startsWith(g))).toEqual(
        Array.from({ length: 20 }, (_, i) => `${g}${i}`),
      );
    }
  });

  it('bounds concurrency and reports free capacity', async () => {
    let active = 0;
    let peak = 0;
    const d = new Dispatcher<string>(
      3,
      3,
      settledNow(async () => {
        active++;
        peak = Math.max(peak, active);
        await tick(5);
        active--;
        return 'processed';
      }),
      skipNever,
    );
    const all = Array.from({ length: 12 }, (_, i) => d.dispatch(delivery(String(i))));
    expect(d.freeCapacity()).toBe(0);
    await Promise.all(all);
    expect(peak).toBe(3);
    expect(d.freeCapacity()).toBe(3);
    await d.idle();
  });

  it('turns a throwing worker into an unsettled outcome instead of a rejection', async () => {
    const d = new Dispatcher<string>(
      1,
      1,
      settledNow(async () => {
        throw new Error('bug');
      }),
      skipNever,
    );
    await expect(d.dispatch(delivery('x'))).resolves.toBe('unsettled');
  });
});

describe('Dispatcher ordering holds', () => {
  it('releases later deliveries of a key whose earlier delivery went back to the broker', async () => {
    const ran: string[] = [];
    const skipped: string[] = [];
    const d = new Dispatcher<string>(
      5,
      5,
      settledNow(async (del) => {
        ran.push(del.body);
        return del.body === 'a1' ? 'retry' : 'processed';
      }),
      async (del) => {
        skipped.push(del.body);
        return 'released';
      },
    );
    const outcomes = await Promise.all(
      ['a0', 'a1', 'a2', 'a3', 'b0'].map((id) => d.dispatch(delivery(id, id[0]))),
    );
    expect(outcomes).toEqual(['processed', 'retry', 'released', 'released', 'processed']);
    expect([...ran].sort()).toEqual(['a0', 'a1', 'b0']);
    expect(skipped).toEqual(['a2', 'a3']);
  });
});

describe('Dispatcher slots', () => {
  it('frees the concurrency slot when the database part ends, while the broker part runs outside it', async () => {
    let dbActive = 0;
    let dbPeak = 0;
    let acking = 0;
    let ackPeak = 0;
    const d = new Dispatcher<string>(
      2,
      8,
      async () => {
        dbActive++;
        dbPeak = Math.max(dbPeak, dbActive);
        await tick(2);
        dbActive--;
        return async () => {
          acking++;
          ackPeak = Math.max(ackPeak, acking);
          await tick(20);
          acking--;
          return 'processed';
        };
      },
      skipNever,
    );
    await Promise.all(Array.from({ length: 8 }, (_, i) => d.dispatch(delivery(String(i)))));
    expect(dbPeak).toBe(2);
    expect(ackPeak).toBeGreaterThan(2);
  });
});
