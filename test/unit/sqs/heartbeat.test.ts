import { describe, expect, it } from '@jest/globals';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import type { BrokerError } from '../../../src/errors.js';
import { Heartbeat } from '../../../adapters/sqs/heartbeat.js';
import { waitFor } from '../../helpers/wait-for.js';
import { FakeSqs, awsError } from './fake-sqs.js';

async function setup(visibility = 1) {
  const sqs = new FakeSqs();
  const url = sqs.createQueue('q', { VisibilityTimeout: String(visibility) });
  const message = sqs.sendMessage(url, 'x');
  await sqs.client.send(new ReceiveMessageCommand({ QueueUrl: url }));
  const lost: BrokerError[] = [];
  const errors: BrokerError[] = [];
  const start = (intervalMs: number) =>
    new Heartbeat({
      client: sqs.client,
      queueUrl: url,
      receiptHandle: message.receiptHandle!,
      messageId: message.messageId,
      receivedAt: Date.now(),
      visibilityTimeout: visibility,
      intervalMs,
      onLost: (e) => lost.push(e),
      onError: (e) => errors.push(e),
    });
  return { sqs, url, message, lost, errors, start };
}

describe('Heartbeat', () => {
  it('keeps the message invisible past its visibility timeout until stopped', async () => {
    const { sqs, message, start, lost } = await setup(1);
    const heartbeat = start(300);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(message.visibleAt).toBeGreaterThan(Date.now());
    const beats = sqs.callsOf('ChangeMessageVisibilityCommand');
    expect(beats.length).toBeGreaterThanOrEqual(3);
    expect(
      beats.every(
        (c) => c.input.VisibilityTimeout === 1 && c.input.ReceiptHandle === message.receiptHandle,
      ),
    ).toBe(true);
    await heartbeat.stop();
    const count = sqs.callsOf('ChangeMessageVisibilityCommand').length;
    await new Promise((r) => setTimeout(r, 400));
    expect(sqs.callsOf('ChangeMessageVisibilityCommand')).toHaveLength(count);
    expect(lost).toHaveLength(0);
  });

  it('declares the message lost once when SQS says the receipt handle is invalid', async () => {
    const { sqs, start, lost, message } = await setup(5);
    sqs.fail('ChangeMessageVisibilityCommand', () => awsError('ReceiptHandleIsInvalid'), 1);
    const heartbeat = start(20);
    await waitFor(() => lost.length === 1, { what: 'lost' });
    await new Promise((r) => setTimeout(r, 100));
    expect(lost).toHaveLength(1);
    expect(lost[0]!.retryable).toBe(false);
    expect(lost[0]!.details).toMatchObject({
      messageIds: [message.messageId],
      reason: 'receipt handle is no longer valid',
    });
    expect(sqs.callsOf('ChangeMessageVisibilityCommand')).toHaveLength(1);
    await heartbeat.stop();
  });

  it('reports a transient failure and keeps beating while the visibility holds', async () => {
    const { sqs, start, lost, errors } = await setup(5);
    sqs.fail('ChangeMessageVisibilityCommand', () => awsError('ThrottlingException'), 1);
    const heartbeat = start(20);
    await waitFor(() => sqs.callsOf('ChangeMessageVisibilityCommand').length >= 3, {
      what: 'beats',
    });
    await heartbeat.stop();
    expect(errors).toHaveLength(1);
    expect(errors[0]!.retryable).toBe(true);
    expect(lost).toHaveLength(0);
  });
});
