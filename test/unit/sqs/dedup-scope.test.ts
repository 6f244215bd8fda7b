/**
 * Issue 11: on a FIFO queue with `DeduplicationScope=messageGroup`, a
 * MessageDeduplicationId is unique only within its group, so the default key becomes
 * `${MessageGroupId} ${MessageDeduplicationId}`. The scope is read from the queue's
 * attributes at start or given as `deduplicationScope`; queue scope keeps the old key.
 * (ElasticMQ, the integration suite's SQS, neither reports the attribute nor
 * deduplicates per group, hence the fake here.)
 */
import { describe, expect, it } from '@jest/globals';
import { sqsSource, type SqsSourceOptions } from '../../../adapters/sqs/index.js';
import { waitFor } from '../../helpers/wait-for.js';
import { fakeContext } from './fake-context.js';
import { FakeSqs } from './fake-sqs.js';

/** Runs an sqsSource over `url` until `count` deliveries were handed over; returns their keys, sorted. */
async function keysOf(
  sqs: FakeSqs,
  options: Omit<SqsSourceOptions<unknown>, 'client'>,
  count: number,
): Promise<Array<string | undefined>> {
  const source = sqsSource({
    client: sqs.client,
    waitTimeSeconds: 0,
    pollErrorBackoff: { initialMs: 5, maxMs: 20 },
    ...options,
  });
  const fake = fakeContext<unknown>();
  const run = source.run(fake.ctx);
  try {
    await waitFor(() => fake.delivered.length >= count, { what: `${count} deliveries` });
  } finally {
    fake.controller.abort();
    await run;
    await source.close();
  }
  return fake.delivered.map((d) => d.key).sort();
}

/** A FIFO queue holding the same deduplication id in two groups, as per-group scope allows. */
function queueWithSameIdInTwoGroups(sqs: FakeSqs, attributes: Record<string, string>): string {
  const url = sqs.createQueue('orders.fifo', { FifoQueue: 'true', ...attributes });
  sqs.sendMessage(url, '{"n":1}', { groupId: 'g1', deduplicationId: 'order-7' });
  sqs.sendMessage(url, '{"n":2}', { groupId: 'g2', deduplicationId: 'order-7' });
  return url;
}

const PER_GROUP = { DeduplicationScope: 'messageGroup', FifoThroughputLimit: 'perMessageGroupId' };

describe('sqsSource default key and the FIFO deduplication scope', () => {
  it('DeduplicationScope=messageGroup read at start: the key is "group dedupId", so the two are two messages', async () => {
    const sqs = new FakeSqs();
    const url = queueWithSameIdInTwoGroups(sqs, PER_GROUP);
    expect(await keysOf(sqs, { queueUrl: url }, 2)).toEqual(['g1 order-7', 'g2 order-7']);
    expect(sqs.callsOf('GetQueueAttributesCommand').length).toBeGreaterThan(0);
  });

  it("deduplicationScope: 'messageGroup' given as an option (verifyQueue off) keys the same way", async () => {
    const sqs = new FakeSqs();
    const url = queueWithSameIdInTwoGroups(sqs, {});
    expect(
      await keysOf(
        sqs,
        { queueUrl: url, verifyQueue: false, deduplicationScope: 'messageGroup' },
        2,
      ),
    ).toEqual(['g1 order-7', 'g2 order-7']);
  });

  it.each([
    ['DeduplicationScope=queue', { DeduplicationScope: 'queue', FifoThroughputLimit: 'perQueue' }],
    ['no DeduplicationScope attribute', {}],
  ])('%s: the key stays the MessageDeduplicationId', async (_what, attributes) => {
    const sqs = new FakeSqs();
    const url = queueWithSameIdInTwoGroups(sqs, attributes);
    expect(await keysOf(sqs, { queueUrl: url }, 2)).toEqual(['order-7', 'order-7']);
  });

  it('a key attribute still wins over the default key under per-group scope', async () => {
    const sqs = new FakeSqs();
    const url = sqs.createQueue('orders.fifo', { FifoQueue: 'true', ...PER_GROUP });
    sqs.sendMessage(url, '{}', {
      groupId: 'g1',
      deduplicationId: 'd-1',
      attributes: { 'Idempotency-Key': 'pay-1' },
    });
    expect(await keysOf(sqs, { queueUrl: url, key: 'Idempotency-Key' }, 1)).toEqual(['pay-1']);
  });
});
