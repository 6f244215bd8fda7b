import { describe, expect, it } from '@jest/globals';
import { UsageError } from '../../../kit/args.js';
import { parseChaosArgs } from '../../../chaos/consumer/args.js';

describe('chaos args: --pipeline', () => {
  it('sets the Kafka pipeline, left to the workers (batch maxSize, else 1) when absent', () => {
    const args = parseChaosArgs(['--broker', 'kafka', '--pipeline', '10', '--concurrency', '2']);
    expect(args.pipeline).toBe(10);
    expect(parseChaosArgs(['--broker', 'kafka']).pipeline).toBeUndefined();
  });

  it('is refused outside Kafka and out of range', () => {
    expect(() => parseChaosArgs(['--broker', 'sqs', '--pipeline', '4'])).toThrow(UsageError);
    expect(() => parseChaosArgs(['--broker', 'kafka', '--pipeline', '0'])).toThrow();
  });
});

describe('chaos args: --broker rabbitmq', () => {
  it('restarts the broker once by default, as Kafka, and takes no Kafka option', () => {
    const args = parseChaosArgs(['--broker', 'rabbitmq']);
    expect(args).toMatchObject({ broker: 'rabbitmq', brokerRestarts: 1 });
    expect(parseChaosArgs(['--broker', 'rabbitmq', '--broker-restarts', '0']).brokerRestarts).toBe(
      0,
    );
    expect(() => parseChaosArgs(['--broker', 'rabbitmq', '--offsets', 'postgres'])).toThrow(
      UsageError,
    );
    expect(() => parseChaosArgs(['--broker', 'rabbitmq', '--control', 'losses'])).toThrow(
      UsageError,
    );
    expect(() => parseChaosArgs(['--broker', 'amqp'])).toThrow(UsageError);
  });
});
