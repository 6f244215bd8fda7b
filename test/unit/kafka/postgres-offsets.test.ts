import { afterEach, describe, expect, it } from '@jest/globals';
import type { Pool, PoolClient } from 'pg';
import { kafkaRecordOf, kafkaSource } from '../../../adapters/kafka/index.js';
import { DatabaseError } from '../../../src/errors.js';
import type { Delivery } from '../../../src/types.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FakeConsumer,
  FakeProducer,
  fakeRunner,
  gate,
  messages,
  tick,
  type Verdict,
} from '../../../kit/kafka-fakes.js';

/** A pool whose SELECT answers from `stored` and that records every statement. */
function fakePool(
  stored: Array<{ topic: string; partition: number; next_offset: string }>,
  failures = 0,
) {
  const queries: Array<{ text: string; values: unknown[] }> = [];
  let remainingFailures = failures;
  const pool = {
    query: async (text: string, values: unknown[] = []) => {
      queries.push({ text, values });
      if (remainingFailures > 0) {
        remainingFailures--;
        throw new Error('connection refused');
      }
      return { rows: stored.filter((r) => (values[1] as string[]).includes(r.topic)) };
    },
  };
  return { pool: pool as unknown as Pool, queries };
}

function fakeTx() {
  const queries: Array<{ text: string; values: unknown[] }> = [];
  const tx = {
    query: async (text: string, values: unknown[] = []) => {
      queries.push({ text, values });
      return { rows: [] };
    },
  };
  return { tx: tx as unknown as PoolClient, queries };
}

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

async function start(
  pool: Pool,
  decide: (d: Delivery<unknown>) => Promise<Verdict> | Verdict = () => ({ do: 'ack' }),
  keyConcurrency = 1,
) {
  const consumer = new FakeConsumer();
  const source = kafkaSource({
    consumer,
    producer: new FakeProducer(),
    groupId: 'billing',
    topics: ['t'],
    offsets: 'postgres',
    pool,
    offsetsSchema: 'my schema',
    commitIntervalMs: 0,
    keyConcurrency,
  });
  const runner = fakeRunner(decide);
  const running = source.run(runner.ctx);
  await waitFor(() => consumer.runConfig !== undefined);
  stops.push(async () => {
    runner.controller.abort();
    await running.catch(() => undefined);
    await source.close();
  });
  return { consumer, runner, source };
}

describe("offsets: 'postgres'", () => {
  it('loads the stored offsets on assignment and skips records below them without delivering', async () => {
    const { pool, queries } = fakePool([{ topic: 't', partition: 0, next_offset: '5' }]);
    const { consumer, runner } = await start(pool);
    consumer.assign({ t: [0, 1] });
    const batch = await consumer.batch('t', 0, messages(3, 4));
    expect(batch.resolved).toBe('6');
    await waitFor(() => consumer.committed('t', 0) === 7);
    expect(runner.delivered.map((d) => kafkaRecordOf(d).offset)).toEqual(['5', '6']);
    expect(queries[0]?.text).toContain('"my schema"."eo_kafka_offsets"');
    expect(queries[0]?.values).toEqual(['billing', ['t']]);
    // Partition 1 has no stored offset: everything is delivered.
    await consumer.batch('t', 1, messages(0, 2));
    await waitFor(() => consumer.committed('t', 1) === 2);
  });

  it('seeks to the stored offset when a whole batch is below it (after an offset reset)', async () => {
    const { pool } = fakePool([{ topic: 't', partition: 0, next_offset: '1000' }]);
    const { consumer, runner } = await start(pool);
    consumer.assign({ t: [0] });
    const batch = await consumer.batch('t', 0, messages(0, 10));
    expect(batch.resolved).toBeUndefined();
    expect(consumer.seeks).toEqual([{ topic: 't', partition: 0, offset: '1000' }]);
    expect(runner.delivered).toEqual([]);
  });

  it('stores the next offset inside the effect transaction, never past an unfinished record', async () => {
    const { pool } = fakePool([]);
    const gates = new Map<string, ReturnType<typeof gate>>();
    const { consumer, runner } = await start(
      pool,
      async (d) => {
        const g = gate();
        gates.set(kafkaRecordOf(d).offset, g);
        await g.promise;
        return { do: 'ack' };
      },
      3,
    );
    consumer.assign({ t: [0] });
    await consumer.batch(
      't',
      0,
      messages(0, 3, (o) => ({ key: Buffer.from(`k${o}`) })),
    );
    await waitFor(() => runner.delivered.length === 3);
    const byOffset = (o: string) =>
      runner.delivered.find((d) => kafkaRecordOf(d).offset === o) as Delivery<unknown>;

    // Record 2 commits first: records 0 and 1 are open, so it may only store 0.
    const two = fakeTx();
    await byOffset('2').inTransaction?.(two.tx, [byOffset('2')]);
    // No mark: record 2 is not below the offset stored.
    expect(two.queries[0]?.values).toEqual(['billing', 't', 0, '0', null, null]);
    expect(two.queries[0]?.text).toMatch(/GREATEST/);
    gates.get('2')?.open();
    await tick(5);

    // Record 0 is the lowest open one: it may store 1 (record 1 is still open).
    const zero = fakeTx();
    await byOffset('0').inTransaction?.(zero.tx, [byOffset('0')]);
    expect(zero.queries[0]?.values).toEqual(['billing', 't', 0, '1', '0', '1700000000000']);
    gates.get('0')?.open();
    await tick(5);

    // Record 1 closes the gap: everything through 2 is done, so 3.
    const one = fakeTx();
    await byOffset('1').inTransaction?.(one.tx, [byOffset('1')]);
    expect(one.queries[0]?.values).toEqual(['billing', 't', 0, '3', '1', '1700000000000']);
    gates.get('1')?.open();
    await waitFor(() => consumer.committed('t', 0) === 3);
  });

  it('a batch committing several records of the partition stores the offset past them all, once', async () => {
    const { pool } = fakePool([]);
    const hold = gate();
    const { consumer, runner } = await start(
      pool,
      async () => {
        await hold.promise;
        return { do: 'ack' };
      },
      3,
    );
    try {
      consumer.assign({ t: [0] });
      await consumer.batch(
        't',
        0,
        messages(0, 4, (o) => ({ key: Buffer.from(`k${o}`) })),
      );
      await waitFor(() => runner.delivered.length === 3);
      // Records 0..2 in one transaction (record 3 not handed over yet): 3 is the next to store.
      const together = runner.delivered.slice(0, 3);
      const tx = fakeTx();
      for (const d of together) await d.inTransaction?.(tx.tx, together);
      // Marked with the highest record below it, offset 2, and its timestamp.
      expect(tx.queries.map((q) => q.values)).toEqual([
        ['billing', 't', 0, '3', '2', '1700000000000'],
      ]);
    } finally {
      hold.open();
    }
  });

  it('a big batch stores its offset with work linear in its size, not quadratic', async () => {
    const { pool } = fakePool([]);
    const hold = gate();
    const size = 1000;
    const { consumer, runner } = await start(
      pool,
      async () => {
        await hold.promise;
        return { do: 'ack' };
      },
      size,
    );
    try {
      consumer.assign({ t: [0] });
      await consumer.batch(
        't',
        0,
        messages(0, size, (o) => ({ key: Buffer.from(`k${o}`) })),
      );
      await waitFor(() => runner.delivered.length === size);
      // Every delivery's hook gets the batch; count the reads of its elements they make.
      let reads = 0;
      const together = new Proxy(runner.delivered.slice(), {
        get(target, property, receiver) {
          if (typeof property === 'string' && /^\d+$/.test(property)) reads++;
          return Reflect.get(target, property, receiver) as unknown;
        },
      });
      const tx = fakeTx();
      for (const d of runner.delivered) await d.inTransaction?.(tx.tx, together);
      expect(tx.queries).toHaveLength(1);
      expect(tx.queries[0]?.values.slice(3, 5)).toEqual([String(size), String(size - 1)]);
      expect(reads).toBeLessThanOrEqual(4 * size);
    } finally {
      hold.open();
    }
  });

  it('retries loading stored offsets while heartbeating, and reports the failures', async () => {
    const { pool } = fakePool([{ topic: 't', partition: 0, next_offset: '2' }], 1);
    const { consumer, runner } = await start(pool);
    consumer.assign({ t: [0] });
    const batch = await consumer.batch('t', 0, messages(0, 3));
    expect(runner.errors[0]).toBeInstanceOf(DatabaseError);
    expect(consumer.heartbeats.length).toBeGreaterThanOrEqual(1);
    expect(batch.resolved).toBe('2');
    await waitFor(() => consumer.committed('t', 0) === 3);
    expect(runner.delivered.map((d) => kafkaRecordOf(d).offset)).toEqual(['2']);
  });

  it('lets a rebalance error from the heartbeat reach kafkajs while waiting', async () => {
    const { pool } = fakePool([], 1);
    const { consumer } = await start(pool);
    consumer.heartbeatFailure = Object.assign(new Error('rebalancing'), {
      type: 'REBALANCE_IN_PROGRESS',
    });
    consumer.assign({ t: [0] });
    await expect(consumer.batch('t', 0, messages(0, 1))).rejects.toThrow('rebalancing');
  });

  it('has no transaction hook in the default kafka offsets mode', async () => {
    const consumer = new FakeConsumer();
    const source = kafkaSource({
      consumer,
      producer: new FakeProducer(),
      groupId: 'g',
      topics: ['t'],
    });
    const runner = fakeRunner();
    const running = source.run(runner.ctx);
    await waitFor(() => consumer.runConfig !== undefined);
    consumer.assign({ t: [0] });
    await consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => runner.delivered.length === 1);
    expect(
      runner.delivered[0] &&
        'inTransaction' in runner.delivered[0] &&
        runner.delivered[0].inTransaction !== undefined,
    ).toBe(false);
    runner.controller.abort();
    await running;
    await source.close();
  });
});
