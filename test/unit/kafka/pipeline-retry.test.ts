/**
 * Issue 27, defect 2 (the partition worker's half): with `pipeline > 1` several records
 * of one ordering key can go back for a retry from one failure (a batch failing as a
 * whole). Each used to back off on its own delay and come back in any order; a record
 * behind a lower offset of its key that is being retried is taken back into the queue
 * instead, and follows that one in offset order.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { kafkaSource, kafkaRecordOf, type KafkaSource } from '../../../adapters/kafka/index.js';
import type { Delivery } from '../../../src/types.js';
import { waitFor } from '../../helpers/wait-for.js';
import { FakeConsumer, FakeProducer, fakeRunner, messages, type Verdict } from '../../../kit/kafka-fakes.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

function start(decide: (delivery: Delivery<unknown>) => Verdict | Promise<Verdict>): {
  consumer: FakeConsumer;
  delivered: Array<Delivery<unknown>>;
  source: KafkaSource;
} {
  const consumer = new FakeConsumer();
  const source = kafkaSource({
    consumer,
    producer: new FakeProducer(),
    groupId: 'g',
    topics: ['t'],
    commitIntervalMs: 0,
    pipeline: 10,
  });
  const runner = fakeRunner(decide);
  const running = source.run(runner.ctx);
  stops.push(async () => {
    runner.controller.abort();
    await running.catch(() => undefined);
    await source.close();
  });
  return { consumer, delivered: runner.delivered, source };
}

const offset = (d: Delivery<unknown>) => Number(kafkaRecordOf(d).offset);

describe('Kafka partition worker, pipeline > 1: records of one key going back together', () => {
  it('retries them in offset order, the later ones behind the first, whatever their delays', async () => {
    // Every record's first attempt fails, the later records with the shorter delays. Like a
    // batch failing as a whole, the five first attempts fail together once all were handed over
    // (a record is not handed over behind one already going back).
    let firstAttempts = 0;
    let allHandedOver!: () => void;
    const together = new Promise<void>((resolve) => (allHandedOver = resolve));
    const { consumer, delivered } = start(async (d): Promise<Verdict> => {
      if (d.attempt !== 1) return { do: 'ack' };
      if (++firstAttempts === 5) allHandedOver();
      await together;
      return { do: 'retry', delayMs: (5 - offset(d)) * 30 };
    });
    await waitFor(() => consumer.runConfig !== undefined);
    consumer.assign({ t: [0] });
    await consumer.batch('t', 0, messages(0, 5));
    await waitFor(() => consumer.committed('t', 0) === 5, { timeoutMs: 5000 });
    expect(delivered.slice(0, 5).map(offset)).toEqual([0, 1, 2, 3, 4]);
    const again = delivered.slice(5);
    expect(again.map(offset)).toEqual([0, 1, 2, 3, 4]);
    // The records taken back spent their attempt like the one they follow.
    expect(again.map((d) => d.attempt)).toEqual([2, 2, 2, 2, 2]);
  });
});
