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
