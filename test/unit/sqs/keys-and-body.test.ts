import { describe, expect, it } from '@jest/globals';
import type { Message } from '@aws-sdk/client-sqs';
import { BodyParseError, InvalidKeyError } from '../../../src/errors.js';
import { decodeBody } from '../../../adapters/sqs/body.js';
import { messageKey } from '../../../adapters/sqs/keys.js';

const message: Message = {
  MessageId: 'mid-1',
  ReceiptHandle: 'rh',
  Body: '{"id":"o-1"}',
  Attributes: { MessageDeduplicationId: 'dedup-1', MessageGroupId: 'g' },
  MessageAttributes: { 'Idempotency-Key': { DataType: 'String', StringValue: 'idem-1' } },
};
const plain = { fifo: false, keyAttribute: undefined, key: undefined };

describe('messageKey', () => {
  it('uses MessageId on standard queues and MessageDeduplicationId on FIFO queues', () => {
    expect(messageKey(message, plain).key).toBe('mid-1');
    expect(messageKey(message, { ...plain, fifo: true }).key).toBe('dedup-1');
    expect(messageKey({ ...message, Attributes: {} }, { ...plain, fifo: true }).key).toBe('mid-1');
  });

  it("keys an outbox relay's message by eo-outbox-id, unless keyAttribute or key says otherwise", () => {
    const fromOutbox: Message = {
      ...message,
      MessageAttributes: {
        ...message.MessageAttributes,
        'eo-outbox-id': { DataType: 'String', StringValue: 'outbox-1' },
      },
    };
    expect(messageKey(fromOutbox, plain).key).toBe('outbox-1');
    expect(messageKey(fromOutbox, { ...plain, fifo: true }).key).toBe('outbox-1');
    expect(messageKey(fromOutbox, { ...plain, keyAttribute: 'Idempotency-Key' }).key).toBe(
      'idem-1',
    );
    expect(messageKey(fromOutbox, { ...plain, key: () => 'mine' }).key).toBe('mine');
  });

  it('reads the configured message attribute, and rejects a message without it', () => {
    expect(messageKey(message, { ...plain, keyAttribute: 'Idempotency-Key' }).key).toBe('idem-1');
    const missing = messageKey(
      { ...message, MessageAttributes: {} },
      { ...plain, keyAttribute: 'Idempotency-Key' },
    );
    expect(missing.key).toBeUndefined();
    expect(missing.rejection).toBeInstanceOf(InvalidKeyError);
    expect(missing.rejection?.details).toMatchObject({
      messageId: 'mid-1',
      keyAttribute: 'Idempotency-Key',
    });
  });

  it('uses a key function, turning a throw into a rejection', () => {
    expect(messageKey(message, { ...plain, key: (m) => `k:${m.MessageId}` }).key).toBe('k:mid-1');
    const thrown = messageKey(message, {
      ...plain,
      key: () => {
        throw new Error('boom');
      },
    });
    expect(thrown.key).toBeUndefined();
    expect(thrown.rejection?.message).toMatch(/boom/);
  });
});

describe('decodeBody', () => {
  it('parses JSON by default and rejects a body that is not JSON with context', () => {
    expect(decodeBody(message, 'json', 'q')).toEqual({ ok: true, body: { id: 'o-1' } });
    const bad = decodeBody({ ...message, Body: 'not json{' }, 'json', 'https://q');
    expect(bad.ok).toBe(false);
    if (bad.ok) return;
    expect(bad.error).toBeInstanceOf(BodyParseError);
    expect(bad.error.retryable).toBe(false);
    expect(bad.error.details).toMatchObject({ queueUrl: 'https://q', messageId: 'mid-1' });
    expect(bad.error.cause).toBeInstanceOf(SyntaxError);
  });

  it('passes text through and runs a custom parser', () => {
    expect(decodeBody({ ...message, Body: 'hello' }, 'text', 'q')).toEqual({
      ok: true,
      body: 'hello',
    });
    expect(decodeBody({ ...message, Body: 'a,b' }, (body) => body.split(','), 'q')).toEqual({
      ok: true,
      body: ['a', 'b'],
    });
    const thrown = decodeBody(
      message,
      () => {
        throw new Error('schema says no');
      },
      'q',
    );
    expect(thrown.ok).toBe(false);
  });
});
