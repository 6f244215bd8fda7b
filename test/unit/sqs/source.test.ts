import { describe, expect, it } from '@jest/globals';
import { BodyParseError, BrokerError, HandlerError } from '../../../src/errors.js';
import type { Delivery, DeliveryOutcome } from '../../../src/types.js';
import { sqsSource, sqsMessage, type SqsSourceOptions } from '../../../adapters/sqs/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { FakeSqs, awsError } from './fake-sqs.js';
import { fakeContext, type FakeContext } from './fake-context.js';

type Started<T> = FakeContext<T> & { run: Promise<void>; stop: () => Promise<void> };

function start<T = unknown>(
  sqs: FakeSqs,
  options: Omit<SqsSourceOptions<T>, 'client'>,
  ctxOptions: Parameters<typeof fakeContext<T>>[0] = {},
): Started<T> {
  const source = sqsSource<T>({
    client: sqs.client,
    waitTimeSeconds: 1,
    pollErrorBackoff: { initialMs: 5, maxMs: 20 },
    ...options,
  });
  const fake = fakeContext<T>(ctxOptions);
  const run = source.run(fake.ctx);
  return {
    ...fake,
    run,
    stop: async () => {
      fake.controller.abort();
      await run;
      await source.close();
    },
  };
}

describe('sqsSource receive loop', () => {
  it('long-polls with all attributes, within the free capacity, and acks by deleting with the receipt handle', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('orders', { VisibilityTimeout: '7' });
    for (let i = 0; i < 3; i++) sqs.sendMessage(url, JSON.stringify({ n: i }));
    const s = start(sqs, { queueUrl: url, batchSize: 5 }, { capacity: 2 });
    await waitFor(() => sqs.remaining(url).length === 0, { what: 'all deleted' });
    await s.stop();
    const receives = sqs.callsOf('ReceiveMessageCommand');
    expect(receives[0]!.input).toMatchObject({
      QueueUrl: url,
      MaxNumberOfMessages: 2,
      WaitTimeSeconds: 1,
      VisibilityTimeout: 7,
      MessageSystemAttributeNames: ['All'],
      MessageAttributeNames: ['All'],
    });
    expect(receives.every((c) => (c.input.MaxNumberOfMessages as number) <= 2)).toBe(true);
    expect(s.delivered.map((d) => d.body)).toEqual([{ n: 0 }, { n: 1 }, { n: 2 }]);
    const first = s.delivered[0]!;
    expect(first.key).toBe(sqsMessage(first)?.MessageId);
    expect(first.attempt).toBe(1);
    expect(first.payload).toBe('{"n":0}');
    expect(first.orderingKey).toBeUndefined();
    const deletedHandles = sqs
      .callsOf('DeleteMessageBatchCommand')
      .flatMap((c) =>
        (c.input.Entries as Array<{ ReceiptHandle: string }>).map((e) => e.ReceiptHandle),
      );
    expect(deletedHandles.sort()).toEqual(
      s.delivered.map((d) => sqsMessage(d).ReceiptHandle).sort(),
    );
  });

  it('does not receive while the runner has no free capacity', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    sqs.sendMessage(url, '1');
    sqs.sendMessage(url, '2');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const s = start(
      sqs,
      { queueUrl: url, batchSize: 1 },
      {
        capacity: 1,
        onDeliver: async (d) => {
          await gate;
          await d.ack();
          return 'processed';
        },
      },
    );
    await waitFor(() => s.delivered.length === 1, { what: 'first delivery' });
    await new Promise((r) => setTimeout(r, 100));
    expect(sqs.callsOf('ReceiveMessageCommand')).toHaveLength(1);
    release();
    await waitFor(() => sqs.remaining(url).length === 0, { what: 'all deleted' });
    await s.stop();
  });

  it('aborts the in-flight long poll when the consumer stops', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const s = start(sqs, { queueUrl: url, waitTimeSeconds: 20 });
    await waitFor(() => sqs.callsOf('ReceiveMessageCommand').length === 1, { what: 'poll' });
    const started = Date.now();
    await s.stop();
    expect(Date.now() - started).toBeLessThan(500);
    expect(s.errors).toHaveLength(0);
  });

  it('keeps receiveConcurrency long polls in flight at once', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const s = start(sqs, { queueUrl: url, waitTimeSeconds: 20, receiveConcurrency: 3 });
    await waitFor(() => sqs.callsOf('ReceiveMessageCommand').length === 3, { what: 'three polls' });
    await new Promise((r) => setTimeout(r, 50));
    expect(sqs.callsOf('ReceiveMessageCommand')).toHaveLength(3); // all three still waiting
    await s.stop();
  });

  it('pauses between empty short polls instead of spinning', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const s = start(sqs, { queueUrl: url, waitTimeSeconds: 0 });
    await new Promise((r) => setTimeout(r, 500));
    await s.stop();
    expect(sqs.callsOf('ReceiveMessageCommand').length).toBeLessThanOrEqual(4);
  });

  it('reports receive errors with context, backs off and keeps polling', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    sqs.fail('ReceiveMessageCommand', () => awsError('ServiceUnavailable'), 2);
    sqs.sendMessage(url, '{}');
    const s = start(sqs, { queueUrl: url });
    await waitFor(() => sqs.remaining(url).length === 0, {
      what: 'message processed after errors',
    });
    await s.stop();
    expect(s.errors).toHaveLength(2);
    expect(s.errors[0]).toBeInstanceOf(BrokerError);
    expect(s.errors[0]!.details).toMatchObject({ operation: 'receive', queueUrl: url });
    expect(s.errors[0]!.retryable).toBe(true);
  });

  it('fails fast when the queue does not exist', async () => {
    const sqs = new FakeSqs();
    const source = sqsSource({
      client: sqs.client,
      queueUrl: 'http://127.0.0.1:9/000000000000/missing',
    });
    const fake = fakeContext();
    const error = await source.run(fake.ctx).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BrokerError);
    expect((error as BrokerError).retryable).toBe(false);
    expect((error as BrokerError).details).toMatchObject({
      queueUrl: 'http://127.0.0.1:9/000000000000/missing',
      reason: 'queue does not exist',
    });
    expect(sqs.callsOf('ReceiveMessageCommand')).toHaveLength(0);
  });

  it('fails fast when the dead-letter queue does not exist', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const source = sqsSource({
      client: sqs.client,
      queueUrl: url,
      deadLetterQueueUrl: `${url}-dlq`,
    });
    const error = await source.run(fakeContext().ctx).catch((e: unknown) => e);
    expect((error as BrokerError).details).toMatchObject({ queueUrl: `${url}-dlq` });
  });

  it('takes attempt from ApproximateReceiveCount and retry() sets the visibility to the delay', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const message = sqs.sendMessage(url, '{}');
    const attempts: number[] = [];
    const s = start(
      sqs,
      { queueUrl: url },
      {
        onDeliver: async (d) => {
          attempts.push(d.attempt);
          if (d.attempt < 3) {
            await d.retry(1, new HandlerError(d.key!, d.attempt, new Error('not yet')));
            return 'retry';
          }
          await d.ack();
          return 'processed';
        },
      },
    );
    await waitFor(() => sqs.remaining(url).length === 0, { what: 'processed on attempt 3' });
    await s.stop();
    expect(attempts).toEqual([1, 2, 3]);
    expect(message.receiveCount).toBe(3);
    const changes = sqs
      .callsOf('ChangeMessageVisibilityCommand')
      .map((c) => c.input.VisibilityTimeout);
    expect(changes).toEqual([1, 1]);
  });

  it('caps a retry delay at the SQS maximum', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const message = sqs.sendMessage(url, '{}');
    const s = start(
      sqs,
      { queueUrl: url },
      {
        onDeliver: async (d) => {
          await d.retry(7 * 24 * 3_600_000, new HandlerError('k', 1, 'x'));
          return 'retry';
        },
      },
    );
    await waitFor(() => sqs.callsOf('ChangeMessageVisibilityCommand').length === 1, {
      what: 'retry',
    });
    await s.stop();
    const seconds = sqs.callsOf('ChangeMessageVisibilityCommand')[0]!.input
      .VisibilityTimeout as number;
    expect(seconds).toBeLessThanOrEqual(43_199);
    expect(seconds).toBeGreaterThan(43_190);
    expect(message.visibleAt - Date.now()).toBeGreaterThan(43_000_000);
  });

  it('release() makes the message visible again at once', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const message = sqs.sendMessage(url, '{}');
    const s = start(
      sqs,
      { queueUrl: url },
      {
        onDeliver: async (d) => {
          await d.release();
          return 'released';
        },
      },
    );
    await waitFor(
      () =>
        s.delivered.length >= 1 &&
        message.visibleAt <= Date.now() &&
        sqs.callsOf('ChangeMessageVisibilityCommand').length >= 1,
      {
        what: 'released',
      },
    );
    await s.stop();
    expect(sqs.callsOf('ChangeMessageVisibilityCommand')[0]!.input.VisibilityTimeout).toBe(0);
  });

  it('rejects a body that is not JSON without holding up the others', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    sqs.sendMessage(url, '{"ok":1}');
    sqs.sendMessage(url, 'not json');
    sqs.sendMessage(url, '{"ok":2}');
    const rejected: Array<Delivery<unknown>> = [];
    const s = start(
      sqs,
      { queueUrl: url },
      {
        onDeliver: async (d): Promise<DeliveryOutcome> => {
          if (d.rejection) {
            rejected.push(d);
            return 'unsettled';
          }
          await d.ack();
          return 'processed';
        },
      },
    );
    await waitFor(() => sqs.remaining(url).length === 1 && rejected.length === 1, {
      what: 'two processed',
    });
    await s.stop();
    expect(rejected[0]!.rejection).toBeInstanceOf(BodyParseError);
    expect(rejected[0]!.payload).toBe('not json');
    expect(sqs.remaining(url)[0]!.body).toBe('not json');
  });

  it('uses the Idempotency-Key attribute as key when told to', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    sqs.sendMessage(url, '{}', { attributes: { 'Idempotency-Key': 'op-1' } });
    sqs.sendMessage(url, '{}', { attributes: { 'Idempotency-Key': 'op-1' } });
    const s = start(sqs, { queueUrl: url, key: 'Idempotency-Key', parse: 'text' });
    await waitFor(() => s.delivered.length === 2, { what: 'both' });
    await s.stop();
    expect(s.delivered.map((d) => d.key)).toEqual(['op-1', 'op-1']);
    expect(s.delivered[0]!.body).toBe('{}');
  });

  it('aborts the delivery signal when its heartbeat finds the message lost', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q', { VisibilityTimeout: '2' });
    sqs.sendMessage(url, '{}');
    let signal: AbortSignal | undefined;
    const s = start(
      sqs,
      { queueUrl: url, heartbeat: 0.05 },
      {
        onDeliver: async (d) => {
          signal = d.signal;
          sqs.fail('ChangeMessageVisibilityCommand', () => awsError('ReceiptHandleIsInvalid'), 1);
          await new Promise<void>((resolve) =>
            d.signal!.addEventListener('abort', () => resolve()),
          );
          return 'unsettled';
        },
      },
    );
    await waitFor(() => signal?.aborted, { what: 'signal aborted' });
    await s.stop();
    expect(signal!.reason).toBeInstanceOf(BrokerError);
    expect(s.errors.some((e) => e.details.operation === 'extend visibility')).toBe(true);
  });

  it('heartbeat: false never touches the visibility while handling', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q', { VisibilityTimeout: '1' });
    sqs.sendMessage(url, '{}');
    const s = start(
      sqs,
      { queueUrl: url, heartbeat: false },
      {
        onDeliver: async (d) => {
          await new Promise((r) => setTimeout(r, 600));
          await d.ack();
          return 'processed';
        },
      },
    );
    await waitFor(() => sqs.remaining(url).length === 0, { what: 'done' });
    await s.stop();
    expect(sqs.callsOf('ChangeMessageVisibilityCommand')).toHaveLength(0);
  });

  it('hands back messages that arrive after the stop began', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const fake = fakeContext();
    const source = sqsSource({ client: sqs.client, queueUrl: url, waitTimeSeconds: 1 });
    // The receive returns while the stop is starting: the messages must not be delivered.
    const client = sqs.client as unknown as { send: (c: unknown, o?: unknown) => Promise<unknown> };
    const send = client.send;
    client.send = async (command, options) => {
      const result = await send(command, options);
      if (
        (command as { constructor: { name: string } }).constructor.name === 'ReceiveMessageCommand'
      ) {
        const messages = (result as { Messages?: unknown[] }).Messages ?? [];
        if (messages.length > 0) fake.controller.abort();
      }
      return result;
    };
    const message = sqs.sendMessage(url, '{}');
    await source.run(fake.ctx);
    await source.close();
    expect(fake.delivered).toHaveLength(0);
    expect(message.visibleAt).toBeLessThanOrEqual(Date.now());
    expect(sqs.callsOf('ChangeMessageVisibilityCommand')[0]!.input.VisibilityTimeout).toBe(0);
  });

  it('close() flushes deletes still waiting for a batch', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    sqs.sendMessage(url, '{}');
    const acks: Array<Promise<void>> = [];
    const s = start(
      sqs,
      { queueUrl: url, deleteBatchDelayMs: 1000 },
      {
        onDeliver: async (d) => {
          acks.push(d.ack());
          return 'processed';
        },
      },
    );
    await waitFor(() => acks.length === 1, { what: 'acked' });
    expect(sqs.callsOf('DeleteMessageBatchCommand')).toHaveLength(0);
    await s.stop();
    await acks[0];
    expect(sqs.remaining(url)).toHaveLength(0);
  });
});
