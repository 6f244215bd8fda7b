/**
 * The @platformatic/kafka translation layer's own promises (docs/kafka.md, choosing a
 * client), against a fake client and stream: a paused partition's records wait and
 * come back in order, a seek drops what lies below it, the whole stream stops fetching
 * at maxQueuedRecords, each group join opens a fresh stream and drops the old one's
 * records, and a failed stream is reported and reopened.
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it, jest } from '@jest/globals';
import type {
  EachBatchPayloadLike,
  KafkaCrashEvent,
  KafkaGroupJoinEvent,
} from '../../../adapters/kafka/index.js';
import { defaultKafkaKey, type KafkaRecord } from '../../../adapters/kafka/index.js';
import {
  platformaticConsumer,
  platformaticProducer,
} from '../../../adapters/kafka/platformatic/index.js';
import { toKafkaRecord } from '../../../adapters/kafka/record.js';
import type {
  PlatformaticAssignment,
  PlatformaticConsumerLike,
  PlatformaticMessageLike,
  PlatformaticProducerLike,
  PlatformaticStreamLike,
} from '../../../adapters/kafka/platformatic/index.js';

class FakeStream extends EventEmitter implements PlatformaticStreamLike {
  readonly offsetsToFetch = new Map<string, bigint>();
  paused = false;
  closed = false;
  pause(): this {
    this.paused = true;
    return this;
  }
  resume(): this {
    this.paused = false;
    return this;
  }
  async close(): Promise<void> {
    this.closed = true;
  }
  /** One fetch response: records are emitted synchronously, as the real stream does. */
  fetched(partition: number, offsets: number[]): void {
    for (const offset of offsets) this.emit('data', message(partition, offset));
  }
}

function message(partition: number, offset: number): PlatformaticMessageLike {
  return {
    topic: 't',
    partition,
    offset: BigInt(offset),
    timestamp: 0n,
    key: undefined,
    value: Buffer.from(String(offset)),
    headerEntries: [[Buffer.from('h'), Buffer.from('1')]],
  };
}

class FakeClient extends EventEmitter {
  readonly groupId = 'g';
  assignments: PlatformaticAssignment[] | null = null;
  readonly streams: FakeStream[] = [];
  joinOnConsume = true;
  consume = jest.fn(async (_options: unknown) => {
    if (this.joinOnConsume) {
      this.joinOnConsume = false;
      this.join([0, 1]);
    }
    const stream = new FakeStream();
    this.streams.push(stream);
    return stream;
  });
  commit = jest.fn(async (_options: unknown): Promise<undefined> => undefined);
  listOffsets = jest.fn(async () => new Map([['t', [100n, 100n]]]));
  leaveGroup = jest.fn(async () => undefined);
  close = jest.fn(async () => undefined);
  join(partitions: number[]): void {
    this.assignments = [{ topic: 't', partitions }];
    this.emit('consumer:group:join', { assignments: this.assignments });
  }
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

async function started(options: { maxQueuedRecords?: number; slow?: boolean } = {}) {
  const client = new FakeClient();
  const consumer = platformaticConsumer(client as unknown as PlatformaticConsumerLike, {
    ...(options.maxQueuedRecords === undefined
      ? {}
      : { maxQueuedRecords: options.maxQueuedRecords }),
  });
  const batches: Array<{ partition: number; offsets: string[]; hw: string | undefined }> = [];
  const records: KafkaRecord[] = [];
  const joins: KafkaGroupJoinEvent[] = [];
  const crashes: KafkaCrashEvent[] = [];
  consumer.on('consumer.group_join', (e) => joins.push(e));
  consumer.on('consumer.crash', (e) => crashes.push(e));
  await consumer.subscribe({ topics: ['t'], fromBeginning: true });
  await consumer.run({
    eachBatch: async ({ batch }: EachBatchPayloadLike) => {
      batches.push({
        partition: batch.partition,
        offsets: batch.messages.map((m) => m.offset),
        hw: batch.highWatermark,
      });
      for (const m of batch.messages) records.push(toKafkaRecord(batch, m));
    },
    eachBatchAutoResolve: false,
    autoCommit: false,
    partitionsConsumedConcurrently: 1,
  });
  const stream = () => client.streams[client.streams.length - 1] as FakeStream;
  return { client, consumer, batches, records, joins, crashes, stream };
}

describe('platformaticConsumer', () => {
  it('rejects what is not a platformatic client, and a bad maxQueuedRecords, with a ConfigurationError', () => {
    expect(() => platformaticConsumer({} as PlatformaticConsumerLike)).toThrow(
      expect.objectContaining({
        code: 'EO_CONFIGURATION',
        message: expect.stringContaining('consume()'),
      }),
    );
    const client = new FakeClient() as unknown as PlatformaticConsumerLike;
    expect(() => platformaticConsumer(client, { maxQueuedRecords: 0 })).toThrow(
      expect.objectContaining({ details: expect.objectContaining({ option: 'maxQueuedRecords' }) }),
    );
    expect(() => platformaticProducer({} as PlatformaticProducerLike)).toThrow(
      expect.objectContaining({ code: 'EO_CONFIGURATION' }),
    );
  });

  it('hands each fetch over as one batch per partition, in kafkajs shape', async () => {
    const { batches, joins, stream, client } = await started();
    expect(joins.map((j) => j.payload.memberAssignment)).toEqual([{ t: [0, 1] }]);
    expect(client.consume).toHaveBeenCalledWith(
      expect.objectContaining({ mode: 'committed', fallbackMode: 'earliest', autocommit: false }),
    );
    stream().fetched(0, [0, 1, 2]);
    stream().fetched(1, [5]);
    await tick();
    expect(batches).toEqual([
      { partition: 0, offsets: ['0', '1', '2'], hw: '100' },
      { partition: 1, offsets: ['5'], hw: '100' },
    ]);
  });

  it("gives a record kafkajs's timestamp text, so its default key is the one kafkajs gives it", async () => {
    const { records, stream } = await started();
    stream().emit('data', { ...message(0, 3), timestamp: 1_700_000_000_123n });
    await tick();
    const [record] = records;
    expect(record?.timestamp).toBe('1700000000123');
    // kafkajs: offset and timestamp as decimal strings, on the same record.
    const kafkajs = toKafkaRecord(
      { topic: 't', partition: 0, messages: [] },
      { key: null, value: record!.value, offset: '3', timestamp: '1700000000123', headers: {} },
    );
    expect(defaultKafkaKey(record!, 'idempotency-key')).toBe('t/0/3/1700000000123');
    expect(defaultKafkaKey(kafkajs, 'idempotency-key')).toBe('t/0/3/1700000000123');
  });

  it('holds a paused partition, then delivers its records in order; the others go on', async () => {
    const { consumer, batches, stream } = await started();
    consumer.pause([{ topic: 't', partitions: [0] }]);
    stream().fetched(0, [0, 1]);
    stream().fetched(1, [0]);
    stream().fetched(0, [2]);
    await tick();
    expect(batches.map((b) => b.partition)).toEqual([1]);
    consumer.resume([{ topic: 't', partitions: [0] }]);
    await tick();
    expect(batches[1]).toMatchObject({ partition: 0, offsets: ['0', '1', '2'] });
  });

  it('drops the records below a seek and moves the fetch position there', async () => {
    const { consumer, batches, stream } = await started();
    consumer.pause([{ topic: 't', partitions: [0] }]);
    stream().fetched(0, [0, 1, 2]);
    consumer.seek({ topic: 't', partition: 0, offset: '10' });
    expect(stream().offsetsToFetch.get('t:0')).toBe(10n);
    stream().fetched(0, [3, 10, 11]);
    consumer.resume([{ topic: 't', partitions: [0] }]);
    await tick();
    expect(batches).toEqual([expect.objectContaining({ partition: 0, offsets: ['10', '11'] })]);
  });

  it('stops the whole stream at maxQueuedRecords and resumes it at half', async () => {
    const { consumer, stream } = await started({ maxQueuedRecords: 4 });
    consumer.pause([{ topic: 't', partitions: [0] }]);
    stream().fetched(0, [0, 1, 2]);
    expect(stream().paused).toBe(false);
    stream().fetched(0, [3]);
    expect(stream().paused).toBe(true);
    consumer.resume([{ topic: 't', partitions: [0] }]);
    expect(stream().paused).toBe(false);
  });

  it("opens a fresh stream on each group join and drops the old one's records", async () => {
    const { client, batches, joins, stream } = await started();
    const old = stream();
    client.join([1]);
    await tick();
    expect(client.streams).toHaveLength(2);
    expect(old.closed).toBe(true);
    expect(joins.map((j) => j.payload.memberAssignment)).toEqual([{ t: [0, 1] }, { t: [1] }]);
    old.fetched(1, [7]); // a fetch sent before the join, landing after it
    stream().fetched(1, [3]);
    await tick();
    expect(batches).toEqual([expect.objectContaining({ partition: 1, offsets: ['3'] })]);
  });

  it('reports a failed stream as a restartable crash and reopens it with the assignment', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'queueMicrotask', 'nextTick'] });
    try {
      const { client, crashes, joins, stream } = await started();
      stream().emit('error', new Error('fetch failed'));
      expect(crashes.map((c) => [c.payload.error.message, c.payload.restart])).toEqual([
        ['fetch failed', true],
      ]);
      await jest.advanceTimersByTimeAsync(1000);
      expect(client.streams).toHaveLength(2);
      expect(joins.map((j) => j.payload.memberAssignment)).toEqual([{ t: [0, 1] }, { t: [0, 1] }]);
    } finally {
      jest.useRealTimers();
    }
  });

  it("gives a commit refused by a generation error kafkajs's error type", async () => {
    const { client, consumer } = await started();
    client.commit.mockRejectedValueOnce(
      Object.assign(new Error('joinGroup failed'), {
        errors: [Object.assign(new Error('rebalancing'), { apiId: 'REBALANCE_IN_PROGRESS' })],
      }),
    );
    await expect(
      consumer.commitOffsets([{ topic: 't', partition: 0, offset: '3' }]),
    ).rejects.toMatchObject({ type: 'REBALANCE_IN_PROGRESS' });
    expect(client.commit).toHaveBeenCalledWith({
      offsets: [{ topic: 't', partition: 0, offset: 3n, leaderEpoch: -1 }],
    });
  });
});
