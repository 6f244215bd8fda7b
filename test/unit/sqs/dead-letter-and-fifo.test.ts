import { describe, expect, it } from '@jest/globals';
import { BodyParseError, HandlerError } from '../../../src/errors.js';
import type { Delivery, DeliveryOutcome } from '../../../src/types.js';
import {
  DEAD_LETTER_ERROR_ATTRIBUTE,
  sqsSource,
  type SqsSourceOptions,
} from '../../../adapters/sqs/index.js';
import {
  errorAttributeSkipped,
  messageBytes,
  sendToDeadLetterQueue,
} from '../../../adapters/sqs/dead-letter.js';
import type { Message, SQSClient } from '@aws-sdk/client-sqs';
import { waitFor } from '../../helpers/wait-for.js';
import { FakeSqs } from './fake-sqs.js';
import { fakeContext } from './fake-context.js';

function start<T>(
  sqs: FakeSqs,
  options: Omit<SqsSourceOptions<T>, 'client'>,
  onDeliver: (d: Delivery<T>) => Promise<DeliveryOutcome>,
  capacity = 10,
) {
  const source = sqsSource<T>({ client: sqs.client, waitTimeSeconds: 1, ...options });
  const fake = fakeContext<T>({ onDeliver, capacity });
  const run = source.run(fake.ctx);
  return {
    ...fake,
    stop: async () => {
      fake.controller.abort();
      await run;
      await source.close();
    },
  };
}

const deadLetterIt = async (d: Delivery<unknown>): Promise<DeliveryOutcome> => {
  await d.deadLetter(d.rejection ?? new HandlerError(d.key ?? '?', d.attempt, 'poison'));
  return 'dead-lettered';
};

describe('dead letters', () => {
  it('moves the message to deadLetterQueueUrl with its attributes and the error, then deletes it', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const dlq = sqs.createQueue('q-dlq');
    const original = sqs.sendMessage(url, 'not json', { attributes: { tenant: 'acme' } });
    const s = start(sqs, { queueUrl: url, deadLetterQueueUrl: dlq }, deadLetterIt);
    await waitFor(() => sqs.remaining(url).length === 0, { what: 'original deleted' });
    await s.stop();
    expect(s.delivered[0]!.rejection).toBeInstanceOf(BodyParseError);
    const [letter] = sqs.remaining(dlq);
    expect(letter!.body).toBe('not json');
    expect(letter!.attributes.tenant).toEqual({ DataType: 'String', StringValue: 'acme' });
    const error = JSON.parse(
      letter!.attributes[DEAD_LETTER_ERROR_ATTRIBUTE]!.StringValue!,
    ) as Record<string, unknown>;
    expect(error).toMatchObject({
      code: 'EO_BODY_PARSE',
      queueUrl: url,
      messageId: original.messageId,
      receiveCount: '1',
    });
  });

  it('keeps the group on a FIFO dead-letter queue; a dedup id of its own', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q.fifo');
    const dlq = sqs.createQueue('q-dlq.fifo');
    const original = sqs.sendMessage(url, '{}', { groupId: 'g1', deduplicationId: 'd1' });
    const s = start(sqs, { queueUrl: url, deadLetterQueueUrl: dlq }, deadLetterIt);
    await waitFor(() => sqs.remaining(dlq).length === 1, { what: 'dead letter' });
    await s.stop();
    const input = sqs.callsOf('SendMessageCommand')[0]!.input;
    expect(input.MessageGroupId).toBe('g1');
    // Another copy of the event (a fan-out to another queue) has the same dedup id 'd1'.
    expect(input.MessageDeduplicationId).not.toBe('d1');
    expect(input.MessageDeduplicationId).not.toBe(original.messageId);
    // The original's dedup id is another copy's too (a fan-out): it stays in the error attribute.
    const error = JSON.parse(
      (input.MessageAttributes as Record<string, { StringValue: string }>)[
        DEAD_LETTER_ERROR_ATTRIBUTE
      ]!.StringValue,
    ) as Record<string, unknown>;
    expect(error).toMatchObject({ deduplicationId: 'd1', groupId: 'g1' });
  });

  it('a FIFO dedup id from the source queue and MessageId: distinct originals never collide', async () => {
    const sent: Array<{ MessageDeduplicationId?: string }> = [];
    const client = {
      send: (command: { input: { MessageDeduplicationId?: string } }) => (
        sent.push(command.input),
        Promise.resolve({})
      ),
    } as unknown as SQSClient;
    const reason = new HandlerError('k', 1, new Error('poison'));
    const dlq = 'http://localhost/000000000000/dlq.fifo';
    const perGroup = 'http://localhost/000000000000/per-group.fifo';
    const copy = (id: string, group: string): Message => ({
      MessageId: id,
      Body: '{}',
      Attributes: { MessageGroupId: group, MessageDeduplicationId: 'order-7' },
    });
    // DeduplicationScope=messageGroup: one dedup id in two groups is two messages.
    await sendToDeadLetterQueue(client, dlq, perGroup, copy('m-1', 'g1'), reason);
    await sendToDeadLetterQueue(client, dlq, perGroup, copy('m-2', 'g2'), reason);
    // A fan-out: the same dedup id and (in principle) MessageId in two source queues.
    await sendToDeadLetterQueue(
      client,
      dlq,
      'http://localhost/000000000000/a.fifo',
      copy('m-3', 'g'),
      reason,
    );
    await sendToDeadLetterQueue(
      client,
      dlq,
      'http://localhost/000000000000/b.fifo',
      copy('m-3', 'g'),
      reason,
    );
    // The same original again (sent, then a crash before the delete): the same id.
    await sendToDeadLetterQueue(client, dlq, perGroup, copy('m-1', 'g1'), reason);
    const ids = sent.map((input) => input.MessageDeduplicationId!);
    expect(new Set(ids.slice(0, 4)).size).toBe(4);
    expect(ids[4]).toBe(ids[0]);
    for (const id of ids) expect(id).toMatch(/^[!-~]{1,128}$/);
  });

  it('without deadLetterQueueUrl, leaves it to the redrive policy: visible again at once', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q', {
      RedrivePolicy: '{"maxReceiveCount":"3","deadLetterTargetArn":"arn"}',
    });
    const message = sqs.sendMessage(url, '{}');
    const s = start(sqs, { queueUrl: url }, deadLetterIt);
    await waitFor(() => message.receiveCount >= 2, { what: 'redelivered' });
    await s.stop();
    expect(sqs.callsOf('ChangeMessageVisibilityCommand')[0]!.input.VisibilityTimeout).toBe(0);
    expect(sqs.callsOf('SendMessageCommand')).toHaveLength(0);
  });

  it('without a redrive policy either, parks the message invisible and warns', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const message = sqs.sendMessage(url, '{}');
    const s = start(sqs, { queueUrl: url }, deadLetterIt);
    await waitFor(() => sqs.callsOf('ChangeMessageVisibilityCommand').length === 1, {
      what: 'parked',
    });
    await s.stop();
    expect(
      sqs.callsOf('ChangeMessageVisibilityCommand')[0]!.input.VisibilityTimeout,
    ).toBeGreaterThan(43_000);
    expect(message.visibleAt - Date.now()).toBeGreaterThan(43_000_000);
    expect(s.warnings.some((w) => /no RedrivePolicy/.test(w))).toBe(true);
  });
});

describe('FIFO queues', () => {
  it('keys by MessageDeduplicationId, orders by MessageGroupId and runs groups in parallel', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('orders.fifo');
    for (let i = 0; i < 5; i++)
      for (const g of ['a', 'b'])
        sqs.sendMessage(url, String(i), { groupId: g, deduplicationId: `${g}-${i}` });
    const running = new Map<string, number>();
    let overlap = false;
    let parallelGroups = 0;
    const order: string[] = [];
    const s = start<number>(sqs, { queueUrl: url }, async (d) => {
      const g = d.orderingKey!;
      if (running.get(g)) overlap = true;
      running.set(g, 1);
      parallelGroups = Math.max(parallelGroups, [...running.values()].filter(Boolean).length);
      await new Promise((r) => setTimeout(r, 10));
      order.push(`${g}${d.body}`);
      running.set(g, 0);
      await d.ack();
      return 'processed';
    });
    await waitFor(() => sqs.remaining(url).length === 0, { what: 'all processed' });
    await s.stop();
    expect(overlap).toBe(false);
    expect(parallelGroups).toBe(2);
    expect(order.filter((x) => x.startsWith('a'))).toEqual(['a0', 'a1', 'a2', 'a3', 'a4']);
    expect(order.filter((x) => x.startsWith('b'))).toEqual(['b0', 'b1', 'b2', 'b3', 'b4']);
    expect(s.delivered.map((d) => d.key)).toContain('a-3');
  });

  it('when a message of a group is retried, releases the rest of the group received with it, so order holds', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('orders.fifo');
    for (let i = 0; i < 3; i++)
      sqs.sendMessage(url, String(i), { groupId: 'g', deduplicationId: `g-${i}` });
    const order: string[] = [];
    let failedOnce = false;
    const s = start<number>(sqs, { queueUrl: url }, async (d) => {
      if (d.body === 0 && !failedOnce) {
        failedOnce = true;
        await d.retry(300, new HandlerError(d.key!, d.attempt, 'first try fails'));
        return 'retry';
      }
      order.push(`${d.body}@${d.attempt}`);
      await d.ack();
      return 'processed';
    });
    await waitFor(() => sqs.remaining(url).length === 0, { what: 'all processed' });
    await s.stop();
    // The followers' held-back receive is not one of their attempts (issue 27).
    expect(order).toEqual(['0@2', '1@1', '2@1']);
  });
});

describe('the dead letter error attribute and SQS size limits', () => {
  const error = { DataType: 'String', StringValue: '{"code":"EO_HANDLER","message":"boom"}' };
  const errorBytes =
    Buffer.byteLength(DEAD_LETTER_ERROR_ATTRIBUTE) + 'String'.length + error.StringValue.length;

  it('counts body, attribute names, types and values as SQS does', () => {
    expect(
      messageBytes('héllo', {
        a: { DataType: 'String', StringValue: 'xyz' },
        b: { DataType: 'Binary', BinaryValue: new Uint8Array(4) },
      }),
    ).toBe(6 + (1 + 6 + 3) + (1 + 6 + 4));
  });

  it('leaves the attribute off only when it would break a limit the message met', () => {
    const room = 262_144 - errorBytes;
    expect(errorAttributeSkipped('x'.repeat(room), {}, error)).toBeUndefined();
    expect(errorAttributeSkipped('x'.repeat(room + 1), {}, error)).toBe('size-limit');
    // Already above 256 KiB: the queues allow more; only 1 MiB is a hard wall.
    expect(errorAttributeSkipped('x'.repeat(300_000), {}, error)).toBeUndefined();
    expect(errorAttributeSkipped('x'.repeat(1_048_576 - errorBytes + 1), {}, error)).toBe(
      'size-limit',
    );
    const ten = Object.fromEntries(
      Array.from({ length: 10 }, (_, i) => [`a${i}`, { DataType: 'String', StringValue: 'v' }]),
    );
    expect(errorAttributeSkipped('small', ten, error)).toBe('attribute-limit');
  });

  it('sends a near-limit dead letter without the attribute, body and attributes intact', async () => {
    const sent: unknown[] = [];
    const client = {
      send: (command: { input: unknown }) => (sent.push(command.input), Promise.resolve({})),
    };
    const body = 'y'.repeat(262_000);
    const result = await sendToDeadLetterQueue(
      client as unknown as SQSClient,
      'http://localhost/q/dlq',
      'http://localhost/q/src',
      {
        MessageId: 'm1',
        Body: body,
        MessageAttributes: { k: { DataType: 'String', StringValue: 'v' } },
      },
      new HandlerError('key', 3, new Error('boom')),
    );
    expect(result).toEqual({ errorAttribute: false, skipped: 'size-limit' });
    expect(sent).toEqual([
      expect.objectContaining({
        MessageBody: body,
        MessageAttributes: { k: { DataType: 'String', StringValue: 'v' } },
      }),
    ]);
  });
});
