/**
 * Issue 32, defect 2, without a broker: with `pipeline` > 1 and less room in the runner
 * than records handed over, a partition's records still reach the runner in offset order
 * (they wait for capacity in turn, not each on its own).
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import { kafkaSource, kafkaRecordOf } from '../../../adapters/kafka/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { FakeConsumer, FakeProducer, fakeRunner, messages, tick } from '../../../kit/kafka-fakes.js';

const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

describe('Kafka partition worker, pipeline beyond the runner capacity', () => {
  it('hands each partition over in offset order', async () => {
    const consumer = new FakeConsumer();
    const source = kafkaSource({
      consumer,
      producer: new FakeProducer(),
      groupId: 'g',
      topics: ['t'],
      commitIntervalMs: 0,
      pipeline: 10,
    });
    // Room for 2: each delivery holds its place for a few ticks, so the others wait.
    const runner = fakeRunner(
      async () => {
        await tick(2);
        return { do: 'ack' };
      },
      { capacity: 2 },
    );
    // The consumer's wait wakes a few steps after room appears (it also waits for the
    // database's health): a record started meanwhile sees the room at once.
    const running = source.run({
      ...runner.ctx,
      waitForCapacity: async () => {
        await runner.ctx.waitForCapacity();
        await tick(1);
      },
    });
    stops.push(async () => {
      runner.controller.abort();
      await running.catch(() => undefined);
      await source.close();
    });
    await waitFor(() => consumer.runConfig !== undefined);
    consumer.assign({ t: [0, 1] });
    await consumer.batch('t', 0, messages(0, 60));
    await consumer.batch('t', 1, messages(0, 60));
    await waitFor(() => consumer.committed('t', 0) === 60 && consumer.committed('t', 1) === 60, {
      timeoutMs: 10_000,
    });
    for (const partition of [0, 1]) {
      const handed = runner.delivered
        .map(kafkaRecordOf)
        .filter((r) => r.partition === partition)
        .map((r) => Number(r.offset));
      expect(handed).toEqual(Array.from({ length: 60 }, (_, i) => i));
    }
  });
});
