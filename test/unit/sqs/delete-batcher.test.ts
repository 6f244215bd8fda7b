import { describe, expect, it } from '@jest/globals';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { BrokerError } from '../../../src/errors.js';
import { DeleteBatcher } from '../../../adapters/sqs/delete-batcher.js';
import { FakeSqs, awsError } from './fake-sqs.js';

async function received(
  sqs: FakeSqs,
  url: string,
  n: number,
): Promise<Array<{ handle: string; id: string }>> {
  for (let i = 0; i < n; i++) sqs.sendMessage(url, `m${i}`);
  const out: Array<{ handle: string; id: string }> = [];
  while (out.length < n) {
    const { Messages = [] } = (await sqs.client.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10 }),
    )) as { Messages?: Array<{ ReceiptHandle?: string; MessageId?: string }> };
    for (const m of Messages) out.push({ handle: m.ReceiptHandle!, id: m.MessageId! });
  }
  return out;
}

async function waitUntil(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((r) => setTimeout(r, 5));
}

describe('DeleteBatcher', () => {
  it('past the hard stop sends nothing more: queued and retried deletes reject at once', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const [a, b] = await received(sqs, url, 2);
    const hardStop = new AbortController();
    const retried: BrokerError[] = [];
    const batcher = new DeleteBatcher(sqs.client, url, {
      delayMs: 10_000,
      attempts: 3,
      retryDelayMs: 600_000, // a re-send that would come far past any test timeout
      onRetry: (e) => retried.push(e),
    });
    batcher.cancelOn(hardStop.signal);
    // b fails once (transient) and waits for its re-send; a waits in the queue.
    sqs.deleteEntryFailures.push({ code: 'InternalError', senderFault: false });
    const second = batcher.delete(b!.handle, b!.id);
    void batcher.flush();
    await waitUntil(() => retried.length === 1);
    const first = batcher.delete(a!.handle, a!.id);
    hardStop.abort();
    await expect(first).rejects.toMatchObject({ details: { willRetry: false } });
    await expect(second).rejects.toMatchObject({ details: { willRetry: false } });
    await batcher.flush(); // nothing left to wait for
    expect(sqs.callsOf('DeleteMessageBatchCommand')).toHaveLength(1);
    expect(sqs.remaining(url)).toHaveLength(2);
    // A delete asked for past the hard stop is refused too, without a request.
    const [c] = await received(sqs, url, 1);
    await expect(batcher.delete(c!.handle, c!.id)).rejects.toBeInstanceOf(BrokerError);
    expect(sqs.callsOf('DeleteMessageBatchCommand')).toHaveLength(1);
  });

  it('groups deletes into batches of at most 10 and resolves each once deleted', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const messages = await received(sqs, url, 25);
    const batcher = new DeleteBatcher(sqs.client, url, { delayMs: 20, attempts: 3 });
    await Promise.all(messages.map((m) => batcher.delete(m.handle, m.id)));
    const sizes = sqs
      .callsOf('DeleteMessageBatchCommand')
      .map((c) => (c.input.Entries as unknown[]).length);
    expect(sizes).toEqual([10, 10, 5]);
    expect(sqs.remaining(url)).toHaveLength(0);
  });

  it('sends a lone delete after the delay, and flush() sends at once', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const [a, b] = await received(sqs, url, 2);
    const slow = new DeleteBatcher(sqs.client, url, { delayMs: 10_000, attempts: 1 });
    const pending = slow.delete(a!.handle, a!.id);
    await new Promise((r) => setTimeout(r, 20));
    expect(sqs.callsOf('DeleteMessageBatchCommand')).toHaveLength(0);
    await slow.flush();
    await pending;
    expect(sqs.callsOf('DeleteMessageBatchCommand')).toHaveLength(1);
    const quick = new DeleteBatcher(sqs.client, url, { delayMs: 5, attempts: 1 });
    await quick.delete(b!.handle, b!.id);
    expect(sqs.remaining(url)).toHaveLength(0);
  });

  it('retries entries that failed transiently and reports each retry', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const messages = await received(sqs, url, 3);
    sqs.deleteEntryFailures.push({ code: 'InternalError', senderFault: false });
    const retries: BrokerError[] = [];
    const batcher = new DeleteBatcher(sqs.client, url, {
      delayMs: 1,
      attempts: 3,
      retryDelayMs: 1,
      onRetry: (e) => retries.push(e),
    });
    await Promise.all(messages.map((m) => batcher.delete(m.handle, m.id)));
    expect(sqs.remaining(url)).toHaveLength(0);
    expect(retries).toHaveLength(1);
    expect(retries[0]!.details).toMatchObject({
      queueUrl: url,
      messageIds: [messages[0]!.id],
      awsCode: 'InternalError',
      willRetry: true,
    });
    expect(
      sqs.callsOf('DeleteMessageBatchCommand').map((c) => (c.input.Entries as unknown[]).length),
    ).toEqual([3, 1]);
  });

  it('gives up at once on an invalid receipt handle, with context', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const [m] = await received(sqs, url, 1);
    const batcher = new DeleteBatcher(sqs.client, url, {
      delayMs: 1,
      attempts: 3,
      retryDelayMs: 1,
    });
    const error = await batcher.delete('stale-handle', m!.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BrokerError);
    expect((error as BrokerError).retryable).toBe(false);
    expect((error as BrokerError).details).toMatchObject({
      queueUrl: url,
      messageIds: [m!.id],
      awsCode: 'ReceiptHandleIsInvalid',
    });
    expect(sqs.callsOf('DeleteMessageBatchCommand')).toHaveLength(1);
  });

  it('retries a failed request up to `attempts` times, then rejects every entry', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('q');
    const messages = await received(sqs, url, 2);
    sqs.fail('DeleteMessageBatchCommand', () => awsError('ServiceUnavailable'), 3);
    const retries: BrokerError[] = [];
    const batcher = new DeleteBatcher(sqs.client, url, {
      delayMs: 1,
      attempts: 3,
      retryDelayMs: 1,
      onRetry: (e) => retries.push(e),
    });
    const results = await Promise.allSettled(messages.map((m) => batcher.delete(m.handle, m.id)));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect(retries).toHaveLength(2);
    const reason = (results[0] as PromiseRejectedResult).reason as BrokerError;
    expect(reason.details).toMatchObject({ attempts: 3, messageIds: messages.map((m) => m.id) });
    expect(reason.cause).toMatchObject({ name: 'ServiceUnavailable' });
    await batcher.flush();
  });
});
