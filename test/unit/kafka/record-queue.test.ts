import { describe, expect, it } from '@jest/globals';
import { RecordQueue } from '../../../adapters/kafka/record-queue.js';

const rec = (n: number) => ({ offset: BigInt(n) });

describe('RecordQueue', () => {
  it('is FIFO across compactions and keeps offset order when a record is taken back', () => {
    const q = new RecordQueue<{ offset: bigint }>();
    for (let i = 0; i < 5000; i++) q.push(rec(i));
    const out: number[] = [];
    for (let i = 0; i < 3000; i++) out.push(Number(q.shift().offset));
    expect(q.length).toBe(2000);
    q.insertByOffset(rec(2999));
    q.insertByOffset(rec(10_000));
    expect(q.length).toBe(2002);
    while (q.length > 0) out.push(Number(q.shift().offset));
    expect(out.slice(0, 3000)).toEqual([...Array(3000).keys()]);
    expect(out.slice(3000)).toEqual([
      2999,
      ...Array.from({ length: 2000 }, (_, i) => 3000 + i),
      10_000,
    ]);
    q.push(rec(7));
    expect(q.shift().offset).toBe(7n);
    expect(q.length).toBe(0);
  });
});
