import { afterEach, describe, expect, it } from '@jest/globals';
import {
  kafkaSource,
  kafkaRecordOf,
  DEAD_LETTER_HEADERS,
  type KafkaSource,
} from '../../../adapters/kafka/index.js';
import type { KafkaSourceOptions } from '../../../adapters/kafka/options.js';
import { BodyParseError, BrokerError, HandlerError } from '../../../src/errors.js';
import type { Delivery } from '../../../src/types.js';
import { waitFor } from '../../helpers/wait-for.js';
import {
  FakeConsumer,
  FakeProducer,
  fakeRunner,
  gate,
  messages,
  message,
  tick,
  type FakeRunner,
  type Verdict,
} from '../../../kit/kafka-fakes.js';

interface Harness {
  source: KafkaSource;
  consumer: FakeConsumer;
  producer: FakeProducer;
  runner: FakeRunner<unknown>;
  running: Promise<void>;
  /** Stops like createConsumer does: abort, wait for run(), close(). */
  stop(): Promise<void>;
}

const open: Harness[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) await h.stop().catch(() => undefined);
});

async function start(
  decide?: (delivery: Delivery<unknown>) => Promise<Verdict> | Verdict,
  options: Partial<KafkaSourceOptions> = {},
  runnerOptions: { capacity?: number } = {},
): Promise<Harness> {
  const consumer = new FakeConsumer();
  const producer = new FakeProducer();
  const source = kafkaSource({
    consumer,
    producer,
    groupId: 'g',
    topics: ['t'],
    commitIntervalMs: 0,
    redeliveryDelayMs: 5,
    ...options,
  });
  const runner = fakeRunner(decide, runnerOptions);
  const running = source.run(runner.ctx);
  await waitFor(() => consumer.runConfig !== undefined);
  let stopping: Promise<void> | undefined;
  const h: Harness = {
    source,
    consumer,
    producer,
    runner,
    running,
    stop: () =>
      (stopping ??= (async () => {
        runner.controller.abort();
        await running.catch(() => undefined);
        await source.close();
      })()),
  };
  open.push(h);
  return h;
}

const offsetsOf = (deliveries: Array<Delivery<unknown>>) =>
  deliveries.map((d) => kafkaRecordOf(d).offset);

describe('kafkaSource: running the consumer', () => {
  it('subscribes and runs with eachBatch, no auto-commit, no auto-resolve', async () => {
    const h = await start(undefined, { fromBeginning: true, partitionConcurrency: 3 });
    expect(h.consumer.connected).toBe(true);
    expect(h.consumer.subscribed).toEqual({ topics: ['t'], fromBeginning: true });
    expect(h.consumer.runConfig).toMatchObject({
      eachBatchAutoResolve: false,
      autoCommit: false,
      partitionsConsumedConcurrently: 3,
    });
  });

  it('delivers records with key, body, raw bytes and ordering key; resolves the fetch position', async () => {
    const h = await start();
    h.consumer.assign({ t: [0] });
    const batch = await h.consumer.batch('t', 0, [
      message(7, { headers: { 'idempotency-key': Buffer.from('order-1') } }),
      message(8),
    ]);
    expect(batch.resolved).toBe('8');
    await waitFor(() => h.runner.delivered.length === 2);
    const [first, second] = h.runner.delivered as [Delivery<unknown>, Delivery<unknown>];
    expect(first.key).toBe('order-1');
    expect(second.key).toBe('t/0/8/1700000000000');
    expect(first.body).toEqual({ n: 7 });
    expect(Buffer.from(first.payload as Uint8Array).toString()).toBe('{"n":7}');
    expect(first.attempt).toBe(1);
    expect(first.orderingKey).toBe('t/0');
    expect(kafkaRecordOf(first)).toMatchObject({ topic: 't', partition: 0, offset: '7' });
    await waitFor(() => h.consumer.committed('t', 0) === 9);
  });

  it('rejects an undecodable value with BodyParseError and dead-letters it when the runner says so', async () => {
    const h = await start((d) =>
      d.rejection ? { do: 'deadLetter', reason: d.rejection } : { do: 'ack' },
    );
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, [message(0, { value: Buffer.from('{not json') }), message(1)]);
    await waitFor(() => h.consumer.committed('t', 0) === 2);
    expect(h.runner.delivered[0]?.rejection).toBeInstanceOf(BodyParseError);
    expect(h.producer.sent).toHaveLength(1);
    expect(h.producer.sent[0]?.topic).toBe('t.dlq');
  });
});

describe('kafkaSource: order and offsets', () => {
  it('handles one partition strictly in order, one record at a time', async () => {
    const h = await start(async () => {
      await tick(1);
      return { do: 'ack' };
    });
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 20));
    await waitFor(() => h.consumer.committed('t', 0) === 20);
    expect(offsetsOf(h.runner.delivered)).toEqual(Array.from({ length: 20 }, (_, i) => String(i)));
    expect(h.runner.maxInFlight()).toBe(1);
  });

  it('runs partitions in parallel, bounded by partitionConcurrency', async () => {
    const release = gate();
    const h = await start(
      async () => {
        await release.promise;
        return { do: 'ack' };
      },
      { partitionConcurrency: 2 },
    );
    h.consumer.assign({ t: [0, 1, 2] });
    for (const p of [0, 1, 2]) await h.consumer.batch('t', p, messages(0, 2));
    await waitFor(() => h.runner.inFlight() === 2);
    await tick(10);
    expect(h.runner.inFlight()).toBe(2);
    release.open();
    await waitFor(() => [0, 1, 2].every((p) => h.consumer.committed('t', p) === 2));
  });

  it('commits only up to the highest contiguous finished offset', async () => {
    const gates = new Map<string, ReturnType<typeof gate>>();
    const h = await start(
      async (d) => {
        const g = gate();
        gates.set(kafkaRecordOf(d).offset, g);
        await g.promise;
        return { do: 'ack' };
      },
      { keyConcurrency: 3 },
    );
    h.consumer.assign({ t: [0] });
    await h.consumer.batch(
      't',
      0,
      messages(10, 3, (o) => ({ key: Buffer.from(`k${o}`) })),
    );
    await waitFor(() => gates.size === 3);
    gates.get('12')?.open();
    gates.get('11')?.open();
    await tick(5);
    expect(h.consumer.commits).toEqual([]);
    gates.get('10')?.open();
    await waitFor(() => h.consumer.committed('t', 0) === 13);
  });

  it('ignores refetched records it already holds but still resolves past them', async () => {
    const h = await start();
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 3));
    const again = await h.consumer.batch('t', 0, messages(1, 4));
    expect(again.resolved).toBe('4');
    await waitFor(() => h.consumer.committed('t', 0) === 5);
    expect(offsetsOf(h.runner.delivered)).toEqual(['0', '1', '2', '3', '4']);
  });

  it('batches commits by commitIntervalMs', async () => {
    const h = await start(undefined, { commitIntervalMs: 60 });
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 5));
    await waitFor(() => h.runner.delivered.length === 5);
    await tick(10);
    expect(h.consumer.commits).toEqual([]);
    await waitFor(() => h.consumer.committed('t', 0) === 5);
    expect(h.consumer.commits).toHaveLength(1);
  });
});

describe('kafkaSource: keyConcurrency', () => {
  it('overlaps different keys and keeps each key in order', async () => {
    const started: string[] = [];
    const finished: string[] = [];
    let active = 0;
    let maxActive = 0;
    const h = await start(
      async (d) => {
        const r = kafkaRecordOf(d);
        started.push(`${r.key?.toString()}:${r.offset}`);
        active++;
        maxActive = Math.max(maxActive, active);
        await tick(5);
        active--;
        finished.push(`${r.key?.toString()}:${r.offset}`);
        return { do: 'ack' };
      },
      { keyConcurrency: 4 },
    );
    h.consumer.assign({ t: [0] });
    await h.consumer.batch(
      't',
      0,
      messages(0, 12, (o) => ({ key: Buffer.from(['a', 'b', 'c'][o % 3] as string) })),
    );
    await waitFor(() => h.consumer.committed('t', 0) === 12);
    expect(maxActive).toBe(3);
    for (const k of ['a', 'b', 'c']) {
      const ofKey = finished
        .filter((s) => s.startsWith(`${k}:`))
        .map((s) => Number(s.split(':')[1]));
      expect(ofKey).toEqual([...ofKey].sort((x, y) => x - y));
    }
    expect(h.runner.delivered[0]?.orderingKey).toBe(`t/0/k:${Buffer.from('a').toString('base64')}`);
  });

  it('keeps key-less records in one ordered stream', async () => {
    const h = await start(
      async () => {
        await tick(1);
        return { do: 'ack' };
      },
      { keyConcurrency: 4 },
    );
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 5));
    await waitFor(() => h.consumer.committed('t', 0) === 5);
    expect(h.runner.maxInFlight()).toBe(1);
    expect(h.runner.delivered[0]?.orderingKey).toBe('t/0/null');
  });
});

describe('kafkaSource: retries and dead letters', () => {
  it('retries in place: pauses only that partition, redelivers with attempt+1, then resumes', async () => {
    const h = await start((d) => (d.attempt < 3 ? { do: 'retry', delayMs: 20 } : { do: 'ack' }));
    h.consumer.assign({ t: [0, 1] });
    await h.consumer.batch('t', 0, messages(0, 2));
    await waitFor(() => h.consumer.pausedSet.has('t/0'));
    expect(h.consumer.pausedSet.has('t/1')).toBe(false);
    await h.consumer.batch(
      't',
      1,
      messages(0, 1, () => ({})),
    );
    await waitFor(() => h.consumer.committed('t', 0) === 2);
    expect(h.consumer.pausedSet.has('t/0')).toBe(false);
    const first = h.runner.delivered.filter(
      (d) => kafkaRecordOf(d).partition === 0 && kafkaRecordOf(d).offset === '0',
    );
    expect(first.map((d) => d.attempt)).toEqual([1, 2, 3]);
    // Record 1 waited for record 0: order is kept through retries.
    const p0 = h.runner.delivered
      .filter((d) => kafkaRecordOf(d).partition === 0)
      .map((d) => kafkaRecordOf(d).offset);
    expect(p0).toEqual(['0', '0', '0', '1', '1', '1']);
  });

  it('produces a dead letter with the original headers and provenance, then commits past it', async () => {
    const reason = new HandlerError('k-1', 3, new Error('card declined'));
    const h = await start(
      (d) => (kafkaRecordOf(d).offset === '0' ? { do: 'deadLetter', reason } : { do: 'ack' }),
      {
        deadLetterTopic: 'parking',
      },
    );
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, [
      message(0, { key: Buffer.from('K'), headers: { 'idempotency-key': 'k-1', other: 'x' } }),
      message(1),
    ]);
    await waitFor(() => h.consumer.committed('t', 0) === 2);
    expect(h.producer.sent).toHaveLength(1);
    const sent = h.producer.sent[0];
    expect(sent?.topic).toBe('parking');
    expect(sent?.acks).toBe(-1);
    expect(sent?.message.key?.toString()).toBe('K');
    expect(sent?.message.value?.toString()).toBe('{"n":0}');
    expect(sent?.message.headers).toMatchObject({
      'idempotency-key': 'k-1',
      other: 'x',
      [DEAD_LETTER_HEADERS.topic]: 't',
      [DEAD_LETTER_HEADERS.partition]: '0',
      [DEAD_LETTER_HEADERS.offset]: '0',
      [DEAD_LETTER_HEADERS.attempts]: '1',
      [DEAD_LETTER_HEADERS.errorCode]: 'EO_HANDLER',
    });
    expect(String(sent?.message.headers?.[DEAD_LETTER_HEADERS.error])).toContain('card declined');
  });

  it('does not commit a record whose dead letter failed; it is delivered again', async () => {
    const reason = new HandlerError('k', 1, new Error('x'));
    const h = await start((d) => (d.attempt === 1 ? { do: 'deadLetter', reason } : { do: 'ack' }));
    h.producer.failures = 1;
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => h.runner.delivered.length === 2);
    expect(h.runner.errors[0]).toBeInstanceOf(BrokerError);
    expect(h.runner.delivered[1]?.attempt).toBe(2);
    await waitFor(() => h.consumer.committed('t', 0) === 1);
    expect(h.producer.sent).toHaveLength(0);
  });

  it('redelivers a delivery released while running, without spending an attempt', async () => {
    let releases = 0;
    const h = await start(() => (releases++ === 0 ? { do: 'release' } : { do: 'ack' }));
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => h.consumer.committed('t', 0) === 1);
    expect(h.runner.delivered.map((d) => d.attempt)).toEqual([1, 1]);
  });

  it('redelivers a delivery the runner left unsettled', async () => {
    const h = await start((d) => (d.attempt === 1 ? { do: 'nothing' } : { do: 'ack' }));
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => h.consumer.committed('t', 0) === 1);
    expect(h.runner.delivered.map((d) => d.attempt)).toEqual([1, 2]);
  });
});

describe('kafkaSource: backpressure', () => {
  it('pauses a partition at maxPendingPerPartition and resumes it at half', async () => {
    const release = gate();
    const h = await start(
      async (d) => {
        if (kafkaRecordOf(d).offset === '0') await release.promise;
        return { do: 'ack' };
      },
      { maxPendingPerPartition: 4, keyConcurrency: 10 },
    );
    h.consumer.assign({ t: [0, 1] });
    await h.consumer.batch(
      't',
      0,
      messages(0, 3, (o) => ({ key: Buffer.from(`k${o}`) })),
    );
    expect(h.consumer.pausedSet.has('t/0')).toBe(false);
    await h.consumer.batch(
      't',
      0,
      messages(3, 2, (o) => ({ key: Buffer.from(`k${o}`) })),
    );
    expect(h.consumer.pausedSet.has('t/0')).toBe(true);
    expect(h.consumer.pausedSet.has('t/1')).toBe(false);
    await tick(5);
    expect(h.source.partitions().find((p) => p.partition === 0)).toMatchObject({
      pending: 5,
      paused: true,
    });
    release.open();
    await waitFor(() => !h.consumer.pausedSet.has('t/0'));
    await waitFor(() => h.consumer.committed('t', 0) === 5);
  });

  it('waits for runner capacity instead of over-delivering', async () => {
    const release = gate();
    const h = await start(
      async () => {
        await release.promise;
        return { do: 'ack' };
      },
      {},
      { capacity: 2 },
    );
    h.consumer.assign({ t: [0, 1, 2, 3] });
    for (const p of [0, 1, 2, 3]) await h.consumer.batch('t', p, messages(0, 1));
    await waitFor(() => h.runner.inFlight() === 2);
    await tick(10);
    expect(h.runner.delivered).toHaveLength(2);
    release.open();
    await waitFor(() => [0, 1, 2, 3].every((p) => h.consumer.committed('t', p) === 1));
  });
});

describe('kafkaSource: rebalances', () => {
  it('revokes every worker on a new assignment: signals abort, late acks never commit', async () => {
    const release = gate();
    const h = await start(async () => {
      await release.promise;
      return { do: 'ack' };
    });
    h.consumer.assign({ t: [0, 1] });
    await h.consumer.batch('t', 0, messages(0, 2));
    await waitFor(() => h.runner.delivered.length === 1);
    const inFlight = h.runner.delivered[0] as Delivery<unknown>;
    h.consumer.assign({ t: [1] });
    expect(inFlight.signal?.aborted).toBe(true);
    release.open();
    await tick(10);
    expect(h.consumer.commits).toEqual([]);
    expect(h.runner.delivered).toHaveLength(1); // offset 1 was dropped with the revoked worker
    expect(h.source.partitions().map((p) => p.partition)).toEqual([1]);
    // A batch of the revoked partition (an old fetch) is ignored and not resolved.
    expect((await h.consumer.batch('t', 0, messages(2, 1))).resolved).toBeUndefined();
  });

  it('starts a re-assigned partition afresh from what kafkajs fetches', async () => {
    const h = await start();
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 2));
    await waitFor(() => h.consumer.committed('t', 0) === 2);
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(2, 2));
    await waitFor(() => h.consumer.committed('t', 0) === 4);
  });

  it('clears a pause of a revoked partition (kafkajs keeps pauses across rebalances)', async () => {
    const h = await start(() => ({ do: 'retry', delayMs: 10_000 }));
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => h.consumer.pausedSet.has('t/0'));
    h.consumer.assign({ t: [0] });
    expect(h.consumer.pausedSet.has('t/0')).toBe(false);
  });

  it('does not dead-letter a record of a revoked partition', async () => {
    const release = gate();
    const h = await start(async () => {
      await release.promise;
      return { do: 'deadLetter', reason: new HandlerError('k', 5, new Error('aborted')) };
    });
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => h.runner.delivered.length === 1);
    h.consumer.assign({ t: [] });
    release.open();
    await tick(10);
    expect(h.producer.sent).toEqual([]);
  });

  it('flushes finished offsets when a rebalance starts', async () => {
    const h = await start(undefined, { commitIntervalMs: 60_000 });
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 3));
    await waitFor(() => h.runner.delivered.length === 3);
    await tick(5);
    expect(h.consumer.commits).toEqual([]);
    h.consumer.rebalancing();
    await waitFor(() => h.consumer.committed('t', 0) === 3);
  });

  it('sends no commit between the start of a rebalance and the new assignment', async () => {
    const release = gate();
    const h = await start(async () => {
      await release.promise;
      return { do: 'ack' };
    });
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => h.runner.delivered.length === 1);
    h.consumer.rebalancing();
    release.open();
    await tick(20);
    expect(h.consumer.commits).toEqual([]);
    // The partition comes back: it starts afresh and commits again.
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 2));
    await waitFor(() => h.consumer.committed('t', 0) === 2);
  });

  it('treats generation errors on commit as expected, and reports other commit failures', async () => {
    const h = await start();
    h.consumer.assign({ t: [0] });
    h.consumer.commitFailure = Object.assign(new Error('rebalancing'), {
      type: 'REBALANCE_IN_PROGRESS',
    });
    await h.consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => h.runner.delivered.length === 1);
    await tick(10);
    expect(h.runner.errors).toEqual([]);
    h.consumer.commitFailure = new Error('socket hang up');
    await h.consumer.batch('t', 0, messages(1, 1));
    await waitFor(() => h.runner.errors.length === 1);
    expect(h.runner.errors[0]).toBeInstanceOf(BrokerError);
    h.consumer.commitFailure = undefined;
    await waitFor(() => h.consumer.committed('t', 0) === 2, { timeoutMs: 3000 });
  });

  it('ends run() with a BrokerError when kafkajs crashes for good, and reports restartable crashes', async () => {
    const h = await start();
    h.consumer.assign({ t: [0] });
    h.consumer.crash(new Error('coordinator gone'), true);
    expect(h.runner.errors[0]).toBeInstanceOf(BrokerError);
    expect(h.source.partitions()).toEqual([]);
    h.consumer.crash(new Error('fatal'), false);
    await expect(h.running).rejects.toBeInstanceOf(BrokerError);
  });
});

describe('kafkaSource: shutdown', () => {
  it('stops taking records, lets in-flight deliveries settle, commits them on close, stops a given consumer', async () => {
    const release = gate();
    const h = await start(
      async () => {
        await release.promise;
        return { do: 'ack' };
      },
      { commitIntervalMs: 60_000 },
    );
    h.consumer.assign({ t: [0] });
    await h.consumer.batch('t', 0, messages(0, 3));
    await waitFor(() => h.runner.delivered.length === 1);
    h.runner.controller.abort();
    let ran = false;
    void h.running.then(() => (ran = true));
    await tick(5);
    expect(ran).toBe(false);
    expect(h.consumer.pausedSet.has('t/0')).toBe(true);
    expect((await h.consumer.batch('t', 0, messages(3, 1))).resolved).toBeUndefined();
    release.open();
    await h.running;
    expect(h.runner.delivered).toHaveLength(1);
    await h.source.close();
    expect(h.consumer.committed('t', 0)).toBe(1);
    expect(h.consumer.stopped).toBe(true);
    expect(h.consumer.connected).toBe(true); // not ours to disconnect
    expect(h.consumer.listenerCount('consumer.group_join')).toBe(0);
  });

  it('never commits released deliveries', async () => {
    const h = await start(() => ({ do: 'release' }));
    h.consumer.assign({ t: [0] });
    h.runner.controller.abort();
    await h.running;
    await h.source.close();
    expect(h.consumer.commits).toEqual([]);
  });

  it('disconnects the consumer and producer it created itself', async () => {
    const consumer = new FakeConsumer();
    const producer = new FakeProducer();
    const kafka = { consumer: () => consumer, producer: () => producer };
    const source = kafkaSource({ kafka, groupId: 'g', topics: ['t'], commitIntervalMs: 0 });
    const runner = fakeRunner(() => ({ do: 'deadLetter', reason: new HandlerError('k', 1, 'x') }));
    const running = source.run(runner.ctx);
    await waitFor(() => consumer.runConfig !== undefined);
    consumer.assign({ t: [0] });
    await consumer.batch('t', 0, messages(0, 1));
    await waitFor(() => consumer.committed('t', 0) === 1);
    expect(producer.connects).toBe(1);
    runner.controller.abort();
    await running;
    await source.close();
    expect(consumer.connected).toBe(false);
    expect(producer.disconnected).toBe(true);
  });

  it('can run only once', async () => {
    const h = await start();
    await expect(h.source.run(h.runner.ctx)).rejects.toMatchObject({ code: 'EO_STATE' });
  });
});
