import { describe, expect, it } from '@jest/globals';
import type { SQSRecord } from 'aws-lambda';
import { lambdaSettings } from '../../../adapters/lambda/options.js';
import { RecordDelivery } from '../../../adapters/lambda/record.js';
import { ConfigurationError } from '../../../src/errors.js';

function record(over: Partial<SQSRecord> = {}, attributes: Partial<SQSRecord['attributes']> = {}) {
  return {
    messageId: 'mid-1',
    receiptHandle: 'rh',
    body: '{"id":1}',
    attributes: {
      ApproximateReceiveCount: '3',
      SentTimestamp: '1700000000000',
      SenderId: 's',
      ApproximateFirstReceiveTimestamp: '1700000000001',
      ...attributes,
    },
    messageAttributes: {},
    md5OfBody: 'x',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:eu-west-1:123456789012:orders',
    awsRegion: 'eu-west-1',
    ...over,
  } satisfies SQSRecord;
}

const keys = { key: undefined, groupScoped: false };

describe('RecordDelivery', () => {
  it('takes messageId as the key of a standard queue, the receive count as the attempt', () => {
    const d = new RecordDelivery(record(), keys, undefined);
    expect(d.key).toBe('mid-1');
    expect(d.attempt).toBe(3);
    expect(d.orderingKey).toBeUndefined();
    expect(d.firstSentAt?.getTime()).toBe(1_700_000_000_000);
    expect(d.body.messageId).toBe('mid-1');
  });

  it('FIFO: the dedup id is the key, the group the ordering key; group-scoped when asked', () => {
    const fifo = record({}, { MessageGroupId: 'g1', MessageDeduplicationId: 'd7' });
    expect(new RecordDelivery(fifo, keys, undefined)).toMatchObject({
      key: 'd7',
      orderingKey: 'g1',
    });
    expect(new RecordDelivery(fifo, { ...keys, groupScoped: true }, undefined).key).toBe('g1 d7');
  });

  it('reads a named String attribute, and rejects a record without it', () => {
    const withKey = record({
      messageAttributes: { 'Idempotency-Key': { dataType: 'String', stringValue: 'pay-1' } },
    });
    const named = { key: 'Idempotency-Key', groupScoped: false };
    expect(new RecordDelivery(withKey, named, undefined).key).toBe('pay-1');
    const missing = new RecordDelivery(record(), named, undefined);
    expect(missing.key).toBeUndefined();
    expect(missing.rejection?.code).toBe('EO_INVALID_KEY');
  });

  it('takes a key function of the record, and its throw as a rejection', () => {
    const fromBody = { key: (r: SQSRecord) => `k-${r.body.length}`, groupScoped: false };
    expect(new RecordDelivery(record(), fromBody, undefined).key).toBe('k-8');
    const throws = {
      key: (): string => {
        throw new Error('no');
      },
      groupScoped: false,
    };
    expect(new RecordDelivery(record(), throws, undefined).rejection).toBeDefined();
  });

  it('is finished only once acked; a retry or release leaves it to come back', async () => {
    const d = new RecordDelivery(record(), keys, 123);
    expect(d.workDeadline).toBe(123);
    await d.retry();
    await d.release();
    expect(d.finished).toBe(false);
    await d.ack();
    expect(d.finished).toBe(true);
  });
});

describe('lambdaSettings', () => {
  it('defaults the margin to 1 s and refuses bad options by name', () => {
    expect(lambdaSettings({ name: 'n', pool: {} as never }).deadlineMarginMs).toBe(1_000);
    expect(() => lambdaSettings({ name: 'n', pool: {} as never, deadlineMarginMs: -1 })).toThrow(
      ConfigurationError,
    );
    expect(() => lambdaSettings({ name: 'n', pool: {} as never, key: '' })).toThrow(/key/);
    expect(() =>
      lambdaSettings({ name: 'n', pool: {} as never, deduplicationScope: 'group' as never }),
    ).toThrow(/deduplicationScope/);
  });
});
