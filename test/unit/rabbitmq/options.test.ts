import { describe, expect, it } from '@jest/globals';
import type { ConsumeMessage } from 'amqplib';
import { ConfigurationError } from '../../../src/errors.js';
import { rabbitmqPublisher, rabbitmqSource, delayStep } from '../../../adapters/rabbitmq/index.js';
import { attemptOf } from '../../../adapters/rabbitmq/types.js';

const message = (headers: Record<string, unknown>): ConsumeMessage =>
  ({
    content: Buffer.from('{}'),
    fields: {},
    properties: { headers },
  }) as unknown as ConsumeMessage;

describe('rabbitmqSource options', () => {
  it('wants exactly one of url and connection, and a queue', () => {
    expect(() => rabbitmqSource({ queue: 'q' })).toThrow(ConfigurationError);
    expect(() => rabbitmqSource({ url: 'amqp://x', queue: '' })).toThrow(ConfigurationError);
    expect(() => rabbitmqSource({ url: 'amqp://x', queue: 'q', prefetch: 0 })).toThrow(
      ConfigurationError,
    );
    expect(rabbitmqSource({ url: 'amqp://x', queue: 'q' }).description).toBe('rabbitmq:q');
  });

  it('refuses a publisher without an exchange or routing key', () => {
    expect(() => rabbitmqPublisher({ url: 'amqp://x', exchange: '', routingKey: '' })).toThrow(
      ConfigurationError,
    );
  });
});

describe('delay steps', () => {
  it('rounds a delay up to 100 ms times a power of two, and sends tiny ones straight back', () => {
    expect(delayStep(0)).toBe(0);
    expect(delayStep(49)).toBe(0);
    expect(delayStep(50)).toBe(100);
    expect(delayStep(100)).toBe(100);
    expect(delayStep(101)).toBe(200);
    expect(delayStep(1000)).toBe(1600);
  });
});

describe('attempts', () => {
  it('adds the quorum delivery count to the eo-attempt header', () => {
    expect(attemptOf(message({}))).toBe(1);
    expect(attemptOf(message({ 'eo-attempt': 3 }))).toBe(3);
    expect(attemptOf(message({ 'x-delivery-count': 2 }))).toBe(3);
    expect(attemptOf(message({ 'eo-attempt': 2, 'x-delivery-count': 1 }))).toBe(3);
  });
});
